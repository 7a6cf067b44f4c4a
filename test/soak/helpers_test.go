package soak_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/bucketkeeper/bucketkeeper/test/testenv"
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	return apimeta.FindStatusCondition(conds, typ)
}

// poll is testenv.Poll for at most timeout, its last error saying how long it waited.
func poll(ctx context.Context, timeout time.Duration, cond func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := testenv.Poll(ctx, cond); err != nil {
		return fmt.Errorf("after %s: %w", timeout, err)
	}
	return nil
}
