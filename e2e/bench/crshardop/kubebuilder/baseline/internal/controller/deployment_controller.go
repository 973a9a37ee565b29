package controller

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// DigestAnnotation is set on a Deployment's pod template to the digest of
// the ConfigMap its annotation ConfigMapLabel names, so that a change of
// the ConfigMap rolls the Deployment.
const DigestAnnotation = "digest.example.com/sha256"

// DeploymentReconciler reconciles a Deployment object
type DeploymentReconciler struct {
	client.Client
	Scheme *runtime.Scheme
}

// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=core,resources=secrets,verbs=get;list;watch

// Reconcile copies the digest of the ConfigMap a Deployment names into its
// pod template.
func (r *DeploymentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)

	var dep appsv1.Deployment
	if err := r.Get(ctx, req.NamespacedName, &dep); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	name := dep.Annotations[ConfigMapLabel]
	if name == "" || !dep.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}

	var secret corev1.Secret
	err := r.Get(ctx, types.NamespacedName{Namespace: dep.Namespace, Name: DigestSecretName(name)}, &secret)
	if apierrors.IsNotFound(err) {
		// Not digested yet: the Secret's creation brings this Deployment
		// back.
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	want := string(secret.Data[DigestKey])
	if want == "" || dep.Spec.Template.Annotations[DigestAnnotation] == want {
		return ctrl.Result{}, nil
	}

	patch := client.MergeFrom(dep.DeepCopy())
	if dep.Spec.Template.Annotations == nil {
		dep.Spec.Template.Annotations = map[string]string{}
	}
	dep.Spec.Template.Annotations[DigestAnnotation] = want
	if err := r.Patch(ctx, &dep, patch); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log.Info("rolled for a new digest", "configmap", name, "digest", want)
	return ctrl.Result{}, nil
}

// deploymentsForSecret maps a digest Secret to the Deployments that name
// its ConfigMap.
func (r *DeploymentReconciler) deploymentsForSecret(ctx context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetLabels()[ConfigMapLabel]
	if name == "" {
		return nil
	}
	var deps appsv1.DeploymentList
	if err := r.List(ctx, &deps, client.InNamespace(obj.GetNamespace())); err != nil {
		logf.FromContext(ctx).Error(err, "listing the Deployments of a digest", "secret", obj.GetName())
		return nil
	}
	var reqs []reconcile.Request
	for _, d := range deps.Items {
		if d.Annotations[ConfigMapLabel] == name {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: d.Namespace, Name: d.Name}})
		}
	}
	return reqs
}

// SetupWithManager sets up the controller with the Manager.
func (r *DeploymentReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&appsv1.Deployment{}).
		Watches(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(r.deploymentsForSecret)).
		Named("deployment").
		Complete(r)
}
