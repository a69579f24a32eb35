// go-tenant: the Tenant operator's semantics on controller-runtime, the reference
// that `python -m bench --only scale` compares the Python implementations with.
//
// For every hedronite.io/v1 Tenant: a finalizer, a namespace tenant-<name> and a
// ResourceQuota tenant-quota in it (requests.cpu = limits.cpu = spec.cpuQuota), both
// labelled hedronite.io/tenant=<name> and owned by the Tenant, and status (namespace,
// cpuQuota, phase, observedGeneration, a Ready condition). Reads come from the
// manager's informer caches (Tenants, Namespaces and ResourceQuotas are watched);
// every write is made only when what exists differs from what is wanted, so an
// unchanged Tenant costs no request at all. On deletion, the namespace is deleted
// (if it is the Tenant's, with its uid as a precondition) and the finalizer removed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

const (
	tenantLabel = "hedronite.io/tenant"
	quotaName   = "tenant-quota"
	finalizer   = "hedronite.io/tenant-namespace"
)

var (
	tenantGVK  = schema.GroupVersionKind{Group: "hedronite.io", Version: "v1", Kind: "Tenant"}
	cpuPattern = regexp.MustCompile(`^([0-9]+(\.[0-9]{1,3})?|[0-9]+m)$`)
)

type reconciler struct{ client.Client }

func newTenant() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(tenantGVK)
	return u
}

func (r *reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	tenant := newTenant()
	if err := r.Get(ctx, req.NamespacedName, tenant); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	name, uid := tenant.GetName(), tenant.GetUID()
	nsName := "tenant-" + name
	owner := metav1.OwnerReference{APIVersion: "hedronite.io/v1", Kind: "Tenant", Name: name, UID: uid,
		Controller: ptr(true), BlockOwnerDeletion: ptr(true)}

	if tenant.GetDeletionTimestamp() != nil {
		if !controllerutil.ContainsFinalizer(tenant, finalizer) {
			return ctrl.Result{}, nil
		}
		ns := &corev1.Namespace{}
		err := r.Get(ctx, types.NamespacedName{Name: nsName}, ns)
		if err == nil && ownedBy(ns.OwnerReferences, uid) && ns.DeletionTimestamp == nil {
			nsUID := ns.UID
			if err := r.Delete(ctx, ns, &client.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &nsUID}}); client.IgnoreNotFound(err) != nil {
				return ctrl.Result{}, err
			}
		} else if client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, err
		}
		patch := client.MergeFrom(tenant.DeepCopy())
		controllerutil.RemoveFinalizer(tenant, finalizer)
		return ctrl.Result{}, r.Patch(ctx, tenant, patch)
	}
	if !controllerutil.ContainsFinalizer(tenant, finalizer) {
		patch := client.MergeFrom(tenant.DeepCopy())
		controllerutil.AddFinalizer(tenant, finalizer)
		if err := r.Patch(ctx, tenant, patch); err != nil {
			return ctrl.Result{}, err
		}
	}

	cpu, _, _ := unstructured.NestedFieldNoCopy(tenant.Object, "spec", "cpuQuota")
	cpuText := fmt.Sprint(cpu)
	if !cpuPattern.MatchString(cpuText) {
		return ctrl.Result{}, r.setStatus(ctx, tenant, map[string]any{"phase": "Failed"}, false, "ReconcileFailed",
			fmt.Sprintf("spec.cpuQuota %q is not a CPU quantity", cpuText))
	}
	wantCPU := resource.MustParse(cpuText)

	// Namespace: create, or restore our label.
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, types.NamespacedName{Name: nsName}, ns); apierrors.IsNotFound(err) {
		ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName, Labels: map[string]string{tenantLabel: name},
			OwnerReferences: []metav1.OwnerReference{owner}}}
		if err := r.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, err
		}
	} else if err != nil {
		return ctrl.Result{}, err
	} else if !ownedBy(ns.OwnerReferences, uid) {
		return ctrl.Result{RequeueAfter: 30 * time.Second}, r.setStatus(ctx, tenant, map[string]any{"phase": "NameTaken"},
			false, "NameTaken", fmt.Sprintf("Namespace %s exists and was not created for this Tenant", nsName))
	} else if ns.DeletionTimestamp != nil {
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	} else if ns.Labels[tenantLabel] != name {
		patch := client.MergeFrom(ns.DeepCopy())
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[tenantLabel] = name
		if err := r.Patch(ctx, ns, patch); err != nil {
			return ctrl.Result{}, err
		}
	}

	// ResourceQuota: create, or correct its CPU and label.
	quota := &corev1.ResourceQuota{}
	hard := corev1.ResourceList{corev1.ResourceRequestsCPU: wantCPU, corev1.ResourceLimitsCPU: wantCPU}
	if err := r.Get(ctx, types.NamespacedName{Namespace: nsName, Name: quotaName}, quota); apierrors.IsNotFound(err) {
		quota = &corev1.ResourceQuota{
			ObjectMeta: metav1.ObjectMeta{Name: quotaName, Namespace: nsName, Labels: map[string]string{tenantLabel: name},
				OwnerReferences: []metav1.OwnerReference{owner}},
			Spec: corev1.ResourceQuotaSpec{Hard: hard},
		}
		if err := r.Create(ctx, quota); err != nil && !apierrors.IsAlreadyExists(err) {
			return ctrl.Result{}, err
		}
	} else if err != nil {
		return ctrl.Result{}, err
	} else if !ownedBy(quota.OwnerReferences, uid) {
		return ctrl.Result{RequeueAfter: 30 * time.Second}, r.setStatus(ctx, tenant, map[string]any{"phase": "NameTaken"},
			false, "NameTaken", fmt.Sprintf("ResourceQuota %s/%s exists and was not created for this Tenant", nsName, quotaName))
	} else if !sameCPU(quota.Spec.Hard, wantCPU) || quota.Labels[tenantLabel] != name {
		patch := client.MergeFrom(quota.DeepCopy())
		if quota.Labels == nil {
			quota.Labels = map[string]string{}
		}
		quota.Labels[tenantLabel] = name
		if quota.Spec.Hard == nil {
			quota.Spec.Hard = corev1.ResourceList{}
		}
		quota.Spec.Hard[corev1.ResourceRequestsCPU] = wantCPU
		quota.Spec.Hard[corev1.ResourceLimitsCPU] = wantCPU
		if err := r.Patch(ctx, quota, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, r.setStatus(ctx, tenant, map[string]any{"namespace": nsName, "cpuQuota": cpuText, "phase": "Ready"},
		true, "Reconciled", fmt.Sprintf("namespace %s and its quota match the Tenant", nsName))
}

// setStatus writes status (fields, observedGeneration, the Ready condition) only if it differs.
func (r *reconciler) setStatus(ctx context.Context, tenant *unstructured.Unstructured, fields map[string]any,
	ready bool, reason, message string) error {
	status, _, _ := unstructured.NestedMap(tenant.Object, "status")
	if status == nil {
		status = map[string]any{}
	}
	want := runtime.DeepCopyJSON(status)
	for k, v := range fields {
		want[k] = v
	}
	generation := tenant.GetGeneration()
	want["observedGeneration"] = generation
	if ready {
		delete(want, "message")
	} else {
		want["message"] = message
	}
	statusWord := map[bool]string{true: "True", false: "False"}[ready]
	since := time.Now().UTC().Format(time.RFC3339)
	var conditions []any
	if old, ok := status["conditions"].([]any); ok {
		for _, c := range old {
			cm, _ := c.(map[string]any)
			if cm["type"] == "Ready" {
				if cm["status"] == statusWord {
					if t, ok := cm["lastTransitionTime"].(string); ok {
						since = t
					}
				}
				continue
			}
			conditions = append(conditions, runtime.DeepCopyJSONValue(c))
		}
	}
	conditions = append(conditions, map[string]any{"type": "Ready", "status": statusWord, "reason": reason,
		"message": message, "observedGeneration": generation, "lastTransitionTime": since})
	want["conditions"] = conditions
	if equalJSON(status, want) {
		return nil
	}
	patch := client.MergeFrom(tenant.DeepCopy())
	if err := unstructured.SetNestedField(tenant.Object, want, "status"); err != nil {
		return err
	}
	return r.Status().Patch(ctx, tenant, patch)
}

func equalJSON(a, b map[string]any) bool {
	return fmt.Sprintf("%v", runtime.DeepCopyJSON(a)) == fmt.Sprintf("%v", runtime.DeepCopyJSON(b))
}

func sameCPU(hard corev1.ResourceList, want resource.Quantity) bool {
	r, ok1 := hard[corev1.ResourceRequestsCPU]
	l, ok2 := hard[corev1.ResourceLimitsCPU]
	return ok1 && ok2 && r.Cmp(want) == 0 && l.Cmp(want) == 0
}

func ownedBy(refs []metav1.OwnerReference, uid types.UID) bool {
	for _, ref := range refs {
		if ref.UID == uid {
			return true
		}
	}
	return false
}

func ptr[T any](v T) *T { return &v }

func main() {
	workers := flag.Int("workers", 4, "concurrent reconciles (MaxConcurrentReconciles)")
	flag.Parse()
	cfg := ctrl.GetConfigOrDie()
	// No client-side rate limit (client-go would otherwise allow 20 requests/s here):
	// the Python clients compared with this one have none either.
	cfg.QPS, cfg.Burst = -1, 0
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	owner := newTenant()
	err = ctrl.NewControllerManagedBy(mgr).
		For(newTenant()).
		Owns(&corev1.Namespace{}).
		Watches(&corev1.ResourceQuota{}, handler.EnqueueRequestForOwner(scheme, mgr.GetRESTMapper(), owner, handler.OnlyControllerOwner())).
		WithOptions(controller.Options{MaxConcurrentReconciles: *workers}).
		Complete(&reconciler{mgr.GetClient()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("go-tenant: started")
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
