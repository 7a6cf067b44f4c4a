package reconcile

import (
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func FindCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	return apimeta.FindStatusCondition(conds, typ)
}

func RemoveCondition(conds *[]metav1.Condition, typ string) {
	apimeta.RemoveStatusCondition(conds, typ)
}

func ConditionIsTrue(conds []metav1.Condition, typ string) bool {
	return apimeta.IsStatusConditionTrue(conds, typ)
}
