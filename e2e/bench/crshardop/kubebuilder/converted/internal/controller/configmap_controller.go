package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sort"

	"github.com/kshard/kshard/controller/crshard"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

const (
	// EnabledLabel marks a ConfigMap whose digest is kept.
	EnabledLabel = "digest.example.com/enabled"
	// ConfigMapLabel names, on a digest Secret, the ConfigMap it digests.
	ConfigMapLabel = "digest.example.com/configmap"
	// DigestKey is the digest Secret's key holding the SHA-256.
	DigestKey = "sha256"
)

// ConfigMapReconciler reconciles a ConfigMap object
type ConfigMapReconciler struct {
	client.Client
	Scheme *runtime.Scheme
}

// +kubebuilder:rbac:groups=core,resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups=core,resources=secrets,verbs=get;list;watch;create;update;patch

// Reconcile keeps the digest Secret of a labelled ConfigMap up to date.
func (r *ConfigMapReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)

	var cm corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &cm); err != nil {
		// A deleted ConfigMap's Secret goes with it: the garbage collector
		// removes what it owns.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cm.Labels[EnabledLabel] != "true" || !cm.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: DigestSecretName(cm.Name), Namespace: cm.Namespace}}
	op, err := controllerutil.CreateOrUpdate(ctx, r.Client, secret, func() error {
		if secret.Labels == nil {
			secret.Labels = map[string]string{}
		}
		secret.Labels[ConfigMapLabel] = cm.Name
		secret.Data = map[string][]byte{DigestKey: []byte(digest(&cm))}
		return controllerutil.SetControllerReference(&cm, secret, r.Scheme)
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	if op != controllerutil.OperationResultNone {
		log.Info("digest written", "secret", secret.Name, "operation", op)
	}
	return ctrl.Result{}, nil
}

// DigestSecretName is the name of the Secret holding ConfigMap name's
// digest.
func DigestSecretName(name string) string { return name + "-digest" }

// digest is the SHA-256 of a ConfigMap's data and binary data, in key
// order.
func digest(cm *corev1.ConfigMap) string {
	h := sha256.New()
	keys := make([]string, 0, len(cm.Data)+len(cm.BinaryData))
	for k := range cm.Data {
		keys = append(keys, k)
	}
	for k := range cm.BinaryData {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h.Write([]byte(k))
		h.Write([]byte{0})
		if v, ok := cm.Data[k]; ok {
			h.Write([]byte(v))
		} else {
			h.Write(cm.BinaryData[k])
		}
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// SetupWithManager sets up the controller with the Manager.
func (r *ConfigMapReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return crshard.ControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}).
		Owns(&corev1.Secret{}).
		Named("configmap").
		Complete(r)
}
