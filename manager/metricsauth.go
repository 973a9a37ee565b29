package manager

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// How long the secure metrics endpoint trusts a review. A scrape every 15
// or 30 seconds then costs a TokenReview and a SubjectAccessReview about
// once a minute per scraper, not twice per scrape. A refusal is kept
// shorter, so that RBAC granted after a refused scrape takes effect within
// seconds; a token revoked, or a permission withdrawn, is still honoured for
// at most metricsAllowTTL.
const (
	metricsAllowTTL = time.Minute
	metricsDenyTTL  = 10 * time.Second
	// metricsCacheMax bounds each cache: tokens are attacker-chosen, so an
	// unbounded map keyed by them would grow with every bogus request.
	metricsCacheMax = 1024
	// metricsReviewTimeout bounds one review: a scrape should fail, not
	// hang, while the API server is slow.
	metricsReviewTimeout = 10 * time.Second
)

// metricsAuth guards the secure metrics endpoint the way the API server
// guards its own non-resource URLs, by delegating both questions to it: who
// is the caller (a TokenReview of the bearer token) and may they get this
// path (a SubjectAccessReview of the non-resource URL, verb get). Grant it
// with a ClusterRole rule {nonResourceURLs: ["/metrics"], verbs: ["get"]}.
type metricsAuth struct {
	tokens  authenticationclient.TokenReviewInterface
	access  authorizationclient.SubjectAccessReviewInterface
	log     logr.Logger
	now     func() time.Time
	allow   time.Duration // how long an answer that lets the caller in is kept
	deny    time.Duration // how long a refusal is kept
	maxSize int

	mu    sync.Mutex // guards both caches
	users map[[sha256.Size]byte]authnResult
	perms map[string]authzResult
}

type authnResult struct {
	user    *authenticationv1.UserInfo // nil: the token was refused
	reason  string
	expires time.Time
}

type authzResult struct {
	allowed bool
	reason  string
	expires time.Time
}

func newMetricsAuth(tokens authenticationclient.TokenReviewInterface, access authorizationclient.SubjectAccessReviewInterface, log logr.Logger) *metricsAuth {
	return &metricsAuth{
		tokens: tokens, access: access, log: log, now: time.Now,
		allow: metricsAllowTTL, deny: metricsDenyTTL, maxSize: metricsCacheMax,
		users: map[[sha256.Size]byte]authnResult{}, perms: map[string]authzResult{},
	}
}

// wrap serves next only to callers the API server authenticates and
// authorizes: 401 without a valid bearer token, 403 when the caller may not
// get the path, 503 when the API server cannot answer.
func (a *metricsAuth) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
			return
		}
		token, ok := bearerToken(r)
		if !ok {
			http.Error(w, "Unauthorized: send a service account token as \"Authorization: Bearer <token>\"", http.StatusUnauthorized)
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), metricsReviewTimeout)
		defer cancel()
		user, reason, err := a.authenticate(ctx, token)
		if err != nil {
			a.log.Error(err, "metrics: cannot review a token; the scrape is refused")
			http.Error(w, "Service Unavailable: cannot authenticate the request (TokenReview failed)", http.StatusServiceUnavailable)
			return
		}
		if user == nil {
			a.log.V(1).Info("metrics: token refused", "reason", reason, "remote", r.RemoteAddr)
			http.Error(w, "Unauthorized: the API server did not authenticate the token", http.StatusUnauthorized)
			return
		}
		allowed, reason, err := a.authorize(ctx, user, "get", r.URL.Path)
		if err != nil {
			a.log.Error(err, "metrics: cannot review access; the scrape is refused", "user", user.Username)
			http.Error(w, "Service Unavailable: cannot authorize the request (SubjectAccessReview failed)", http.StatusServiceUnavailable)
			return
		}
		if !allowed {
			a.log.V(1).Info("metrics: access refused", "user", user.Username, "path", r.URL.Path, "reason", reason)
			http.Error(w, fmt.Sprintf("Forbidden: user %q may not get %s; grant it a ClusterRole with nonResourceURLs [%q] and verbs [\"get\"]", user.Username, r.URL.Path, r.URL.Path), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearerToken returns the token of an "Authorization: Bearer" header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// authenticate returns the token's user, or nil and the reason when the API
// server refuses it. Errors (the API server unreachable, the review
// forbidden to this replica) are returned, not cached.
func (a *metricsAuth) authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, string, error) {
	key := sha256.Sum256([]byte(token)) // the cache holds no token
	now := a.now()
	a.mu.Lock()
	if e, ok := a.users[key]; ok && now.Before(e.expires) {
		a.mu.Unlock()
		return e.user, e.reason, nil
	}
	a.mu.Unlock()
	review, err := a.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("TokenReview: %w (the replica's service account needs create on tokenreviews.authentication.k8s.io)", err)
	}
	e := authnResult{reason: review.Status.Error, expires: now.Add(a.deny)}
	if review.Status.Authenticated {
		u := review.Status.User
		e.user, e.expires = &u, now.Add(a.allow)
	} else if e.reason == "" {
		e.reason = "not authenticated"
	}
	a.mu.Lock()
	a.users[key] = e
	prune(a.users, now, a.maxSize, func(e authnResult) time.Time { return e.expires })
	a.mu.Unlock()
	return e.user, e.reason, nil
}

// authorize asks whether user may verb the non-resource URL path.
func (a *metricsAuth) authorize(ctx context.Context, user *authenticationv1.UserInfo, verb, path string) (bool, string, error) {
	key := accessKey(user, verb, path)
	now := a.now()
	a.mu.Lock()
	if e, ok := a.perms[key]; ok && now.Before(e.expires) {
		a.mu.Unlock()
		return e.allowed, e.reason, nil
	}
	a.mu.Unlock()
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	review, err := a.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("SubjectAccessReview: %w (the replica's service account needs create on subjectaccessreviews.authorization.k8s.io)", err)
	}
	e := authzResult{allowed: review.Status.Allowed && !review.Status.Denied, reason: review.Status.Reason, expires: now.Add(a.deny)}
	if e.allowed {
		e.expires = now.Add(a.allow)
	}
	if review.Status.EvaluationError != "" {
		e.reason = strings.TrimSpace(e.reason + " " + review.Status.EvaluationError)
	}
	a.mu.Lock()
	a.perms[key] = e
	prune(a.perms, now, a.maxSize, func(e authzResult) time.Time { return e.expires })
	a.mu.Unlock()
	return e.allowed, e.reason, nil
}

// accessKey identifies a SubjectAccessReview's question: everything the
// authorizer may look at.
func accessKey(u *authenticationv1.UserInfo, verb, path string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q %q %q %q", verb, path, u.Username, u.UID)
	groups := append([]string(nil), u.Groups...)
	sort.Strings(groups)
	fmt.Fprintf(&b, " %q", groups)
	keys := make([]string, 0, len(u.Extra))
	for k := range u.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, " %q=%q", k, []string(u.Extra[k]))
	}
	return b.String()
}

// prune keeps m within max entries: it drops expired entries once m is
// over max, and everything if that is not enough (a flood of distinct
// tokens then costs reviews, not memory).
func prune[K comparable, V any](m map[K]V, now time.Time, max int, expires func(V) time.Time) {
	if len(m) <= max {
		return
	}
	for k, v := range m {
		if !now.Before(expires(v)) {
			delete(m, k)
		}
	}
	if len(m) > max {
		clear(m)
	}
}
