package manifests

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// The monitoring sources in config/prometheus; the chart carries copies `make manifests`
// makes (charts/bucketkeeper/files), which `make verify` and TestChartMonitoringFilesAreCopies
// keep identical.
const (
	rulesFile     = "config/prometheus/prometheusrule.yaml"
	dashboardFile = "config/prometheus/dashboards/bucketkeeper.json"
	dashboardKey  = "bucketkeeper.json"
)

var promql = parser.NewParser(parser.Options{})

// ruleGroups parses the PrometheusRule's spec with Prometheus' own rule-file parser,
// which also parses every expression and every annotation template.
func ruleGroups(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	objs := decodeAll(t, rulesFile, readFile(t, rulesFile))
	if len(objs) != 1 || objs[0].GetKind() != "PrometheusRule" {
		t.Fatalf("%s: want one PrometheusRule, got %d objects", rulesFile, len(objs))
	}
	spec, err := yaml.Marshal(objs[0].Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	groups, errs := rulefmt.Parse(spec, false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler))
	if len(errs) > 0 {
		t.Fatalf("%s: %v", rulesFile, errs)
	}
	return groups
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	Panels []struct {
		ID          int    `json:"id"`
		Title       string `json:"title"`
		Description string `json:"description"`
		Type        string `json:"type"`
		Targets     []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(readFile(t, dashboardFile), &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// grafanaVariable matches $name and ${name}: Grafana substitutes them before the query
// reaches Prometheus.
var grafanaVariable = regexp.MustCompile(`\$\{?(\w+)\}?`)

// substitute replaces Grafana's variables by what Grafana would send: a duration for the
// interval variables, a regular expression for the others (they sit in =~ matchers).
func substitute(expr string) string {
	return grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
		switch strings.Trim(v, "${}") {
		case "__rate_interval", "__interval", "__range":
			return "5m"
		default:
			return ".*"
		}
	})
}

// metricNames returns the metric names an expression selects.
func metricNames(t *testing.T, where, expr string) []string {
	t.Helper()
	ast, err := promql.ParseExpr(expr)
	if err != nil {
		t.Fatalf("%s: %q does not parse: %v", where, expr, err)
	}
	var names []string
	parser.Inspect(ast, func(node parser.Node, _ []parser.Node) error {
		if vs, ok := node.(*parser.VectorSelector); ok {
			name := vs.Name
			for _, m := range vs.LabelMatchers {
				if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
			if name == "" {
				t.Errorf("%s: selector %s names no metric", where, vs)
			}
			names = append(names, name)
		}
		return nil
	})
	if len(names) == 0 {
		t.Errorf("%s: %q selects no metric", where, expr)
	}
	return names
}

// referencedMetrics maps every metric name the alerts and the dashboard use to where.
func referencedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	refs := map[string][]string{}
	for _, g := range ruleGroups(t).Groups {
		for _, r := range g.Rules {
			where := "alert " + r.Alert
			for _, n := range metricNames(t, where, r.Expr) {
				refs[n] = append(refs[n], where)
			}
		}
	}
	d := loadDashboard(t)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			where := "panel " + p.Title
			for _, n := range metricNames(t, where, substitute(tg.Expr)) {
				refs[n] = append(refs[n], where)
			}
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((\w+),\s*\w+\)$`)
	for _, v := range d.Templating.List {
		if v.Definition == "" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("dashboard variable %s: query %q is not label_values(metric, label)", v.Name, v.Definition)
			continue
		}
		refs[m[1]] = append(refs[m[1]], "variable "+v.Name)
	}
	return refs
}

// TestAlertRules: the rules parse with Prometheus' parser, and every alert waits
// before firing and tells the on-call engineer what is wrong and what to do.
func TestAlertRules(t *testing.T) {
	groups := ruleGroups(t)
	alerts := 0
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule that is not an alert (record %q)", g.Name, r.Record)
				continue
			}
			alerts++
			if r.For == 0 {
				t.Errorf("alert %s fires on a single evaluation; give it a for: duration", r.Alert)
			}
			if r.Labels["severity"] == "" {
				t.Errorf("alert %s has no severity label", r.Alert)
			}
			for _, a := range []string{"summary", "description", "runbook", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("alert %s has no %s annotation", r.Alert, a)
				}
			}
		}
	}
	if alerts < 5 {
		t.Fatalf("%d alerts, want at least the five docs/operations.md describes", alerts)
	}
}

// TestDashboardQueries: every panel has a query, and every query (Grafana's variables
// substituted) parses as PromQL.
func TestDashboardQueries(t *testing.T) {
	d := loadDashboard(t)
	if len(d.Panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if p.Title == "" || p.Description == "" {
			t.Errorf("panel %d: title %q, description %q; both are needed", p.ID, p.Title, p.Description)
		}
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if len(p.Targets) == 0 {
			t.Errorf("panel %s has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if _, err := promql.ParseExpr(substitute(tg.Expr)); err != nil {
				t.Errorf("panel %s: %q: %v", p.Title, tg.Expr, err)
			}
		}
	}
	if refs := referencedMetrics(t); len(refs) == 0 {
		t.Fatal("no metric referenced")
	}
}

// operationsDoc is the page that describes every alert and panel; each alert's
// runbook_url points at the alert's own section of it (runbookURL).
const operationsDoc = "docs/operations.md"

// runbookURL is where an alert's runbook_url must point: the section of operationsDoc
// headed by the alert's name (GitHub's anchor of "### `Name`" is the name in lower case).
func runbookURL(alert string) string {
	return "https://github.com/bucketkeeper/bucketkeeper/blob/main/" + operationsDoc + "#" + strings.ToLower(alert)
}

// TestOperationsDocDescribesMonitoring: docs/operations.md has a section for every alert,
// which the alert's runbook_url points at, and names every panel.
func TestOperationsDocDescribesMonitoring(t *testing.T) {
	doc := string(readFile(t, operationsDoc))
	for _, g := range ruleGroups(t).Groups {
		for _, r := range g.Rules {
			if !strings.Contains(doc, "\n### `"+r.Alert+"`\n") {
				t.Errorf("%s has no section for alert %s (### `%s`)", operationsDoc, r.Alert, r.Alert)
			}
			if got, want := r.Annotations["runbook_url"], runbookURL(r.Alert); got != want {
				t.Errorf("alert %s: runbook_url %q, want %q", r.Alert, got, want)
			}
		}
	}
	for _, p := range loadDashboard(t).Panels {
		if !strings.Contains(doc, "**"+p.Title+"**") {
			t.Errorf("%s does not describe panel %q (as **%s**)", operationsDoc, p.Title, p.Title)
		}
	}
}

// TestChartMonitoringFilesAreCopies: the chart's files/ holds byte-identical copies of
// config/prometheus, no more, no less (`make manifests` copies them).
func TestChartMonitoringFilesAreCopies(t *testing.T) {
	root := repoRoot(t)
	want := map[string]string{
		"charts/bucketkeeper/files/prometheusrule.yaml": rulesFile,
	}
	dashboards, err := filepath.Glob(filepath.Join(root, "config/prometheus/dashboards/*.json"))
	if err != nil || len(dashboards) == 0 {
		t.Fatalf("no dashboards in config/prometheus/dashboards: %v", err)
	}
	for _, d := range dashboards {
		want["charts/bucketkeeper/files/dashboards/"+filepath.Base(d)] = "config/prometheus/dashboards/" + filepath.Base(d)
	}
	var got []string
	err = filepath.WalkDir(filepath.Join(root, "charts/bucketkeeper/files"), func(path string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			rel, _ := filepath.Rel(root, path)
			got = append(got, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range got {
		src, ok := want[f]
		if !ok {
			t.Errorf("%s has no source in config/prometheus: run make manifests", f)
			continue
		}
		if !bytes.Equal(readFile(t, f), readFile(t, src)) {
			t.Errorf("%s differs from %s: run make manifests", f, src)
		}
		delete(want, f)
	}
	for f := range want {
		t.Errorf("%s is missing: run make manifests", f)
	}
}

// monitoringObjects returns the PrometheusRule and the dashboard ConfigMap of a
// rendering (nil where absent).
func monitoringObjects(objs []*unstructured.Unstructured) (rule, dash *unstructured.Unstructured) {
	for _, o := range objs {
		switch {
		case o.GetKind() == "PrometheusRule":
			rule = o
		case o.GetKind() == "ConfigMap" && o.GetLabels()["grafana_dashboard"] == "1":
			dash = o
		}
	}
	return rule, dash
}

// checkMonitoring compares a rendering's PrometheusRule and dashboard with the sources.
func checkMonitoring(t *testing.T, source string, objs []*unstructured.Unstructured, wantNamespace string) {
	t.Helper()
	rule, dash := monitoringObjects(objs)
	if rule == nil || dash == nil {
		t.Fatalf("%s: PrometheusRule %v, dashboard ConfigMap %v; want both", source, rule != nil, dash != nil)
	}
	src := decodeAll(t, rulesFile, readFile(t, rulesFile))[0]
	if rule.GetAPIVersion() != src.GetAPIVersion() || !reflect.DeepEqual(rule.Object["spec"], src.Object["spec"]) {
		t.Errorf("%s: the PrometheusRule differs from %s", source, rulesFile)
	}
	if rule.GetNamespace() != wantNamespace || dash.GetNamespace() != wantNamespace {
		t.Errorf("%s: namespaces %q and %q, want %q", source, rule.GetNamespace(), dash.GetNamespace(), wantNamespace)
	}
	data, _, _ := unstructured.NestedStringMap(dash.Object, "data")
	if len(data) != 1 || data[dashboardKey] != string(readFile(t, dashboardFile)) {
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		t.Errorf("%s: dashboard ConfigMap keys %v; want exactly %s, byte-identical to %s", source, keys, dashboardKey, dashboardFile)
	}
}

// TestChartMonitoring: off by default; enabled, the chart renders the same
// PrometheusRule and dashboard as config/prometheus, with the labels asked for.
func TestChartMonitoring(t *testing.T) {
	if rule, dash := monitoringObjects(renderChart(t, nil).Objects); rule != nil || dash != nil {
		t.Fatalf("by default the chart renders PrometheusRule %v, dashboard %v; want neither", rule != nil, dash != nil)
	}
	objs := renderChart(t, map[string]any{"monitoring": map[string]any{
		"prometheusRule":   map[string]any{"enabled": true, "labels": map[string]any{"release": "kube-prometheus-stack"}},
		"grafanaDashboard": map[string]any{"enabled": true, "annotations": map[string]any{"grafana_folder": "storage"}},
	}}).Objects
	checkMonitoring(t, "chart", objs, namespace)
	rule, dash := monitoringObjects(objs)
	if rule.GetLabels()["release"] != "kube-prometheus-stack" {
		t.Errorf("PrometheusRule labels %v lack monitoring.prometheusRule.labels", rule.GetLabels())
	}
	if dash.GetAnnotations()["grafana_folder"] != "storage" {
		t.Errorf("dashboard annotations %v lack monitoring.grafanaDashboard.annotations", dash.GetAnnotations())
	}

	// Only one of them, and the dashboard where Grafana's sidecar looks.
	objs = renderChart(t, map[string]any{"monitoring": map[string]any{
		"grafanaDashboard": map[string]any{"enabled": true, "namespace": "grafana"},
	}}).Objects
	rule, dash = monitoringObjects(objs)
	if rule != nil || dash == nil || dash.GetNamespace() != "grafana" {
		t.Errorf("dashboard alone in namespace grafana: PrometheusRule %v, dashboard %v", rule != nil, dash)
	}
}

// TestKustomizeMonitoring: `kustomize build config/prometheus` renders the same two
// objects, and config/default does not include them.
func TestKustomizeMonitoring(t *testing.T) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(repoRoot(t), "config", "prometheus"))
	if err != nil {
		t.Fatalf("kustomize build config/prometheus: %v", err)
	}
	out, err := resMap.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	objs := decodeAll(t, "config/prometheus", out)
	if len(objs) != 2 {
		t.Errorf("config/prometheus renders %d objects, want the PrometheusRule and the dashboard", len(objs))
	}
	checkMonitoring(t, "config/prometheus", objs, namespace)
	if rule, dash := monitoringObjects(renderKustomize(t)); rule != nil || dash != nil {
		t.Errorf("config/default includes monitoring objects; they belong to config/prometheus only")
	}
}

// TestChartKubeVersion: the chart refuses clusters older than the Kubernetes minor
// version the tests run (docs/supported-versions.md), as `helm install` and `helm
// template --kube-version` do.
func TestChartKubeVersion(t *testing.T) {
	chrt, err := loader.Load(filepath.Join(repoRoot(t), "charts", "bucketkeeper"))
	if err != nil {
		t.Fatal(err)
	}
	install := func(version string) error {
		kv, err := chartutil.ParseKubeVersion(version)
		if err != nil {
			t.Fatal(err)
		}
		inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
		inst.ClientOnly, inst.DryRun, inst.Replace = true, true, true
		inst.ReleaseName, inst.Namespace, inst.KubeVersion = releaseName, namespace, kv
		_, err = inst.Run(chrt, map[string]any{})
		return err
	}
	for _, v := range []string{"v1.36.9", "v1.31.0", "v1.30.14"} {
		if err := install(v); err == nil || !strings.Contains(err.Error(), "kubeVersion") {
			t.Errorf("Kubernetes %s: %v; want the chart's kubeVersion to refuse it", v, err)
		}
	}
	for _, v := range []string{"v1.37.0", "v1.37.2", "v1.38.1", "v1.37.0-gke.1000"} {
		if err := install(v); err != nil {
			t.Errorf("Kubernetes %s refused: %v", v, err)
		}
	}
}
