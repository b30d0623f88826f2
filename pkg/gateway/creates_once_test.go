package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// busyOnce answers the first request of each method with code and a Retry-After of
// one second, every later one with an empty ConfigMap, and counts requests by method.
type busyOnce struct {
	code int

	mu   sync.Mutex
	seen map[string]int
}

func (b *busyOnce) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.seen[r.Method]++
	first := b.seen[r.Method] == 1
	b.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if first {
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(b.code)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Code: int32(b.code), Reason: reasonOf[b.code], Message: "busy"})
		return
	}
	if r.Method == http.MethodPost {
		w.WriteHeader(http.StatusCreated)
	}
	_ = json.NewEncoder(w).Encode(corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns"}})
}

var reasonOf = map[int]metav1.StatusReason{
	http.StatusTooManyRequests:     metav1.StatusReasonTooManyRequests,
	http.StatusServiceUnavailable:  metav1.StatusReasonServiceUnavailable,
	http.StatusInternalServerError: metav1.StatusReasonInternalError,
}

func (b *busyOnce) count(method string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seen[method]
}

// A create answered 429 or 5xx with a Retry-After is not sent again (client-go would,
// after the wait, past the live guard's read); a read still is.
func TestSendCreatesOnce(t *testing.T) {
	for _, code := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable, http.StatusInternalServerError} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			srv := &busyOnce{code: code, seen: map[string]int{}}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			cfg := &rest.Config{Host: ts.URL}
			cfg.Wrap(SendCreatesOnce)
			cs, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns"}}
			_, err = cs.CoreV1().ConfigMaps("ns").Create(ctx, cm, metav1.CreateOptions{})
			if got := apierrors.ReasonForError(err); err == nil || got != reasonOf[code] {
				t.Errorf("create answered %d: got error %v (reason %q), want reason %q", code, err, got, reasonOf[code])
			}
			if n := srv.count(http.MethodPost); n != 1 {
				t.Errorf("create answered %d with a Retry-After was sent %d times, want once", code, n)
			}
			if _, err := cs.CoreV1().ConfigMaps("ns").Get(ctx, "cm", metav1.GetOptions{}); err != nil {
				t.Errorf("read answered %d once: got %v, want client-go's retry to succeed", code, err)
			}
			if n := srv.count(http.MethodGet); n != 2 {
				t.Errorf("read answered %d with a Retry-After was sent %d times, want twice (client-go's retry)", code, n)
			}
		})
	}
}
