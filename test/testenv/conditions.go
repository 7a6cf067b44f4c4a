package testenv

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DescribeConditions writes conditions on one line, "[Type=Status Reason: message] ...",
// for a test's failure message.
func DescribeConditions(conds []metav1.Condition) string {
	var b strings.Builder
	for _, c := range conds {
		fmt.Fprintf(&b, "[%s=%s %s: %s] ", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}
