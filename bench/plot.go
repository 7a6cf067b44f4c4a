package main

import (
	"image/color"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// plotProbes draws probes per second over the measured window for both strategies.
func plotProbes(dir string, interval time.Duration, ours, baseline []float64) error {
	p := plot.New()
	p.Title.Text = "Probes per second, " + interval.String() + " interval"
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "probes/s"
	for _, s := range []struct {
		name string
		ys   []float64
	}{{"per-bucket scheduler (ours)", ours}, {"single global ticker", baseline}} {
		pts := make(plotter.XYs, len(s.ys))
		for i, y := range s.ys {
			pts[i] = plotter.XY{X: float64(i), Y: y}
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		if s.name[0] == 'g' {
			line.Color = color.RGBA{R: 200, A: 255}
			line.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		} else {
			line.Width = vg.Points(2)
		}
		p.Add(line)
		p.Legend.Add(s.name, line)
	}
	p.Legend.Top = true
	return p.Save(8*vg.Inch, 4*vg.Inch, filepath.Join(dir, "probes-per-second.png"))
}

// plotRSS draws the manager's resident memory against the number of buckets.
func plotRSS(dir string, counts []int, rss []float64) error {
	p := plot.New()
	p.Title.Text = "Manager RSS after convergence"
	p.X.Label.Text = "StorageBuckets"
	p.Y.Label.Text = "MiB"
	pts := make(plotter.XYs, len(counts))
	for i := range counts {
		pts[i] = plotter.XY{X: float64(counts[i]), Y: rss[i] / (1 << 20)}
	}
	line, points, err := plotter.NewLinePoints(pts)
	if err != nil {
		return err
	}
	p.Add(line, points)
	return p.Save(6*vg.Inch, 4*vg.Inch, filepath.Join(dir, "rss.png"))
}
