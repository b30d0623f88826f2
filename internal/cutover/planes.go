package cutover

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Secrets says where the projects' kubeconfig Secrets are and how they name their
// project, as the replicas read them.
type Secrets struct {
	// Namespace is the provider namespace.
	Namespace string
	// Label marks kubeconfig Secrets (value "true").
	Label string
	// ProjectAnnotation, on a Secret, names its project; without it the Secret's name does.
	ProjectAnnotation string
}

// PlaneTimeout bounds each request to a plane, so that one unreachable plane cannot
// hold the check up.
const PlaneTimeout = 30 * time.Second

// Planes builds a client of each project's plane from the kubeconfig Secrets (only of
// projects, when not empty), as the sweep does. A project the replicas cannot engage
// is a blocked row instead of a plane: one named by two or more Secrets, one whose
// Secret gives no client, and one of projects that no Secret names. Only failing to
// list the Secrets is an error. The clients are made lazily: nothing is asked of a
// plane until Check lists.
func Planes(ctx context.Context, hub client.Reader, s Secrets, projects []string) (map[string]client.Client, []Row, error) {
	list := &corev1.SecretList{}
	if err := hub.List(ctx, list, client.InNamespace(s.Namespace), client.MatchingLabels{s.Label: "true"}); err != nil {
		return nil, nil, fmt.Errorf("listing kubeconfig Secrets in %s: %w", s.Namespace, err)
	}
	byProject := map[string][]*corev1.Secret{}
	for i := range list.Items {
		sec := &list.Items[i]
		project := sec.Name
		if p := sec.Annotations[s.ProjectAnnotation]; s.ProjectAnnotation != "" && p != "" {
			project = p
		}
		if len(projects) == 0 || slices.Contains(projects, project) {
			byProject[project] = append(byProject[project], sec)
		}
	}
	planes := map[string]client.Client{}
	var rows []Row
	for project, named := range byProject {
		if len(named) > 1 {
			names := make([]string, len(named))
			for i, sec := range named {
				names[i] = sec.Name
			}
			sort.Strings(names)
			for _, name := range names {
				rows = append(rows, Row{Verdict: Blocked, Project: project, Kind: KindSecret, Namespace: s.Namespace, Name: name,
					Detail: fmt.Sprintf("project %s is named by %d kubeconfig Secrets (%s): the replicas engage none of them and the plane was not checked; keep one", project, len(names), strings.Join(names, ", "))})
			}
			continue
		}
		c, err := planeClient(named[0])
		if err != nil {
			rows = append(rows, Row{Verdict: Blocked, Project: project, Kind: KindSecret, Namespace: s.Namespace, Name: named[0].Name,
				Detail: fmt.Sprintf("the kubeconfig Secret gives no client of the plane (%v): the replicas cannot engage it either and the plane was not checked; fix the Secret", err)})
			continue
		}
		planes[project] = c
	}
	for _, project := range projects {
		if _, ok := byProject[project]; !ok {
			rows = append(rows, Row{Verdict: Blocked, Project: project, Kind: KindSecret, Namespace: s.Namespace,
				Detail: fmt.Sprintf("no kubeconfig Secret in %s (labelled %s=true) names project %s: check the name given to --project", s.Namespace, s.Label, project)})
		}
	}
	return planes, rows, nil
}

// planeClient builds an uncached client of the plane a kubeconfig Secret names.
func planeClient(s *corev1.Secret) (client.Client, error) {
	data := s.Data["kubeconfig"]
	if len(data) == 0 {
		return nil, errors.New(`no "kubeconfig" key`)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig does not parse: %w", err)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = PlaneTimeout
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("building the client: %w", err)
	}
	return c, nil
}
