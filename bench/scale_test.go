package main

import (
	"math"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

func histogram(count uint64, cumulative map[float64]uint64) *dto.Histogram {
	h := &dto.Histogram{SampleCount: &count}
	for _, upper := range []float64{0.1, 1, 10} {
		c := cumulative[upper]
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: &upper, CumulativeCount: &c})
	}
	return h
}

// The quantile counts only what was observed between the two scrapes and interpolates
// within a bucket as Prometheus' histogram_quantile does.
func TestHistogramQuantile(t *testing.T) {
	before := histogram(100, map[float64]uint64{0.1: 100, 1: 100, 10: 100}) // all fast, before the window
	after := histogram(200, map[float64]uint64{0.1: 150, 1: 190, 10: 200})  // window: 50 ≤0.1, 40 ≤1, 10 ≤10
	for _, tc := range []struct{ q, want float64 }{
		{0.5, 0.1},                 // rank 50: the end of the first bucket
		{0.9, 1},                   // rank 90: the end of the second
		{0.95, 1 + 9*(95-90)/10.0}, // rank 95: halfway into the third
	} {
		got, n, err := histogramQuantile(tc.q, before, after)
		if err != nil || n != 100 || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("q=%v: got %v over %v observations (err %v), want %v over 100", tc.q, got, n, err, tc.want)
		}
	}
	if _, _, err := histogramQuantile(0.99, after, after); err == nil {
		t.Error("a window without observations gave a quantile, want an error")
	}
	beyond := histogram(110, map[float64]uint64{0.1: 100, 1: 100, 10: 100}) // 10 of 110 later than 10s
	if got, _, _ := histogramQuantile(0.99, nil, beyond); !math.IsInf(got, 1) {
		t.Errorf("p99 with 9%% beyond the last bound = %v, want +Inf", got)
	}
}
