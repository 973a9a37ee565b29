package controlplane

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var metaConfigMap = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "survives-restart", Namespace: "default"}, Data: map[string]string{"k": "v"}}
