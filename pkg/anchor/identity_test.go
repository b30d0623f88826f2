package anchor

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

const (
	testUID   = types.UID("0b7c4c4e-3f0a-4a4e-9d0e-5d2c1f6a7b8c")
	testNSUID = types.UID("9f8e7d6c-5b4a-4321-8fed-cba987654321")
)

func testOwner() Owner {
	return Owner{
		Project:   "org/proj",
		Group:     "gateway.networking.k8s.io",
		Kind:      "Gateway",
		Namespace: "default",
		Name:      "web",
		UID:       testUID,
	}
}

func testLabels() map[string]string {
	return map[string]string{
		LabelClusterName: "cluster-org_proj",
		LabelGroup:       "gateway.networking.k8s.io",
		LabelKind:        "Gateway",
		LabelName:        "web",
		LabelNamespace:   "default",
	}
}

// with returns testLabels with k set to v, or removed when remove is true.
func with(k, v string, remove bool) map[string]string {
	l := testLabels()
	if remove {
		delete(l, k)
	} else {
		l[k] = v
	}
	return l
}

func TestClusterNameValue(t *testing.T) {
	cases := map[string]struct {
		reason  string
		project string
		want    string
	}{
		"Plain":    {reason: "A project without a slash is written as is.", project: "proj", want: "cluster-proj"},
		"Org":      {reason: "The slash of an org-scoped project is written as an underscore.", project: "org/proj", want: "cluster-org_proj"},
		"Dotted":   {reason: "Dots are kept.", project: "a.b-c", want: "cluster-a.b-c"},
		"Leading":  {reason: "A leading slash gives the legacy form, which reads back without it.", project: "/proj", want: "cluster-_proj"},
		"Empty":    {reason: "No validation happens here; Owner.Validate does it.", project: "", want: "cluster-"},
		"TwoSlash": {reason: "Every slash is encoded.", project: "a/b/c", want: "cluster-a_b_c"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ClusterNameValue(tc.project)); diff != "" {
				t.Errorf("%s\nClusterNameValue(%q): -want +got:\n%s", tc.reason, tc.project, diff)
			}
		})
	}
}

func TestProjectFromClusterName(t *testing.T) {
	cases := map[string]struct {
		reason  string
		value   string
		want    string
		wantErr bool
	}{
		"Plain":           {reason: "The current encoding of a plain project.", value: "cluster-proj", want: "proj"},
		"Org":             {reason: "An underscore stands for the slash of an org-scoped project.", value: "cluster-org_proj", want: "org/proj"},
		"LegacyLeading":   {reason: "A leading underscore is a leading slash that was once part of the name.", value: "cluster-_proj", want: "proj"},
		"Dotted":          {reason: "Project names are DNS-1123 subdomains.", value: "cluster-a.b-1", want: "a.b-1"},
		"Empty":           {reason: "No project at all.", value: "cluster-", wantErr: true},
		"OnlyUnderscore":  {reason: "A legacy slash with nothing after it.", value: "cluster-_", wantErr: true},
		"TwoSeparators":   {reason: "Projects hold at most one slash.", value: "cluster-a_b_c", wantErr: true},
		"LegacyAndOrg":    {reason: "A leading slash before an org-scoped name never existed; refuse rather than guess.", value: "cluster-_org_proj", wantErr: true},
		"DoubleLeading":   {reason: "Only one legacy slash is known.", value: "cluster-__proj", wantErr: true},
		"TrailingSep":     {reason: "An org without a project.", value: "cluster-org_", wantErr: true},
		"NoDash":          {reason: "The prefix is cluster- with its dash.", value: "clusterx", wantErr: true},
		"NoDashProject":   {reason: "The prefix is cluster- with its dash.", value: "clusterproj", wantErr: true},
		"NoPrefix":        {reason: "A bare project is not an encoded value.", value: "proj", wantErr: true},
		"Uppercase":       {reason: "Project names are lowercase.", value: "cluster-Proj", wantErr: true},
		"UppercasePrefix": {reason: "The prefix is lowercase.", value: "Cluster-proj", wantErr: true},
		"Slash":           {reason: "A slash cannot appear in a label value, so it was never written.", value: "cluster-org/proj", wantErr: true},
		"LeadingDash":     {reason: "DNS-1123 names start with an alphanumeric.", value: "cluster--proj", wantErr: true},
		"Empty string":    {reason: "Nothing at all.", value: "", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ProjectFromClusterName(tc.value)
			if tc.wantErr {
				if err == nil {
					t.Errorf("%s\nProjectFromClusterName(%q) = %q, want an error", tc.reason, tc.value, got)
				} else if !errors.Is(err, ErrMalformed) {
					t.Errorf("%s\nProjectFromClusterName(%q): error %v does not wrap ErrMalformed", tc.reason, tc.value, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nProjectFromClusterName(%q): unexpected error: %v", tc.reason, tc.value, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nProjectFromClusterName(%q): -want +got:\n%s", tc.reason, tc.value, diff)
			}
		})
	}
}

func TestClusterNameRoundTrip(t *testing.T) {
	for _, p := range []string{"proj", "org/proj", "a.b", "x-1/y.2"} {
		got, err := ProjectFromClusterName(ClusterNameValue(p))
		if err != nil || got != p {
			t.Errorf("ProjectFromClusterName(ClusterNameValue(%q)) = %q, %v; want %q, nil", p, got, err, p)
		}
	}
}

func TestNames(t *testing.T) {
	if diff := cmp.Diff("anchor-"+string(testUID), Name(testUID)); diff != "" {
		t.Errorf("Name: -want +got:\n%s", diff)
	}
	if diff := cmp.Diff("ns-"+string(testNSUID), MappedNamespace(testNSUID)); diff != "" {
		t.Errorf("MappedNamespace: -want +got:\n%s", diff)
	}
}

func TestOwnerOf(t *testing.T) {
	obj := &metav1.ObjectMeta{Namespace: "default", Name: "web", UID: testUID}
	gvk := schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "Gateway"}
	if diff := cmp.Diff(testOwner(), OwnerOf("org/proj", gvk, obj)); diff != "" {
		t.Errorf("OwnerOf: -want +got:\n%s", diff)
	}
}

func TestOwnerLabels(t *testing.T) {
	if diff := cmp.Diff(testLabels(), testOwner().Labels()); diff != "" {
		t.Errorf("Labels: -want +got:\n%s", diff)
	}
	core := Owner{Project: "proj", Kind: "Service", Namespace: "ns", Name: "svc", UID: testUID}
	want := map[string]string{
		LabelClusterName: "cluster-proj",
		LabelGroup:       "",
		LabelKind:        "Service",
		LabelName:        "svc",
		LabelNamespace:   "ns",
	}
	if diff := cmp.Diff(want, core.Labels()); diff != "" {
		t.Errorf("Labels of a core-group owner: -want +got:\n%s", diff)
	}
}

func TestOwnerValidate(t *testing.T) {
	long := strings.Repeat("a", 60)
	cases := map[string]struct {
		reason  string
		owner   func(*Owner)
		wantErr bool
	}{
		"Valid":         {reason: "A complete owner round-trips.", owner: func(*Owner) {}},
		"CoreGroup":     {reason: "The core group is empty.", owner: func(o *Owner) { o.Group = "" }},
		"NoUID":         {reason: "An anchor named anchor- identifies nothing.", owner: func(o *Owner) { o.UID = "" }, wantErr: true},
		"LeadingSlash":  {reason: "A legacy project name would read back without its slash.", owner: func(o *Owner) { o.Project = "/proj" }, wantErr: true},
		"LongProject":   {reason: "The cluster name must fit in a label value.", owner: func(o *Owner) { o.Project = long }, wantErr: true},
		"NoNamespace":   {reason: "Anchors stand for namespaced objects.", owner: func(o *Owner) { o.Namespace = "" }, wantErr: true},
		"NoKind":        {reason: "The kind is needed to read the owner back.", owner: func(o *Owner) { o.Kind = "" }, wantErr: true},
		"UppercaseUID":  {reason: "The API server writes lowercase UIDs.", owner: func(o *Owner) { o.UID = types.UID(strings.ToUpper(string(testUID))) }, wantErr: true},
		"UnderscoreOrg": {reason: "An underscore in the project would read back as a slash.", owner: func(o *Owner) { o.Project = "a_b" }, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := testOwner()
			tc.owner(&o)
			err := o.Validate()
			if (err != nil) != tc.wantErr {
				t.Errorf("%s\nValidate(%s) = %v, want error: %t", tc.reason, o, err, tc.wantErr)
			}
		})
	}
}

func TestDecode(t *testing.T) {
	name := Name(testUID)
	cases := map[string]struct {
		reason  string
		name    string
		labels  map[string]string
		want    Owner
		wantErr bool
	}{
		"Valid": {
			reason: "An anchor in the current format decodes to its owner.",
			name:   name, labels: testLabels(), want: testOwner(),
		},
		"ExtraLabels": {
			reason: "Labels other than the five are ignored.",
			name:   name, labels: func() map[string]string { l := testLabels(); l["other"] = "x"; return l }(), want: testOwner(),
		},
		"LegacyProject": {
			reason: "A leading underscore is the legacy leading slash.",
			name:   name, labels: with(LabelClusterName, "cluster-_proj", false),
			want: func() Owner { o := testOwner(); o.Project = "proj"; return o }(),
		},
		"CoreGroup": {
			reason: "An empty group label is the core group.",
			name:   name, labels: with(LabelGroup, "", false),
			want: func() Owner { o := testOwner(); o.Group = ""; return o }(),
		},
		"NilLabels":         {reason: "No labels at all.", name: name, labels: nil, wantErr: true},
		"MissingCluster":    {reason: "Each of the five labels is required.", name: name, labels: with(LabelClusterName, "", true), wantErr: true},
		"MissingGroup":      {reason: "The group label is required even though it may be empty.", name: name, labels: with(LabelGroup, "", true), wantErr: true},
		"MissingKind":       {reason: "Each of the five labels is required.", name: name, labels: with(LabelKind, "", true), wantErr: true},
		"MissingName":       {reason: "Each of the five labels is required.", name: name, labels: with(LabelName, "", true), wantErr: true},
		"MissingNamespace":  {reason: "Each of the five labels is required.", name: name, labels: with(LabelNamespace, "", true), wantErr: true},
		"BadPrefix":         {reason: "Only anchor- names are anchors.", name: "anchors-" + string(testUID), labels: testLabels(), wantErr: true},
		"NoPrefix":          {reason: "A bare UID is not an anchor name.", name: string(testUID), labels: testLabels(), wantErr: true},
		"NotUUID":           {reason: "The name must carry a UID.", name: "anchor-web", labels: testLabels(), wantErr: true},
		"UppercaseUUID":     {reason: "UIDs are lowercase; another spelling is not what Name writes.", name: "anchor-" + strings.ToUpper(string(testUID)), labels: testLabels(), wantErr: true},
		"UUIDNoDashes":      {reason: "Only the canonical form is accepted.", name: "anchor-" + strings.ReplaceAll(string(testUID), "-", ""), labels: testLabels(), wantErr: true},
		"UUIDTrailing":      {reason: "Nothing may follow the UID.", name: name + "x", labels: testLabels(), wantErr: true},
		"EmptyName":         {reason: "No name.", name: "", labels: testLabels(), wantErr: true},
		"BadProject":        {reason: "The cluster name must decode.", name: name, labels: with(LabelClusterName, "cluster-a_b_c", false), wantErr: true},
		"BareProject":       {reason: "The cluster name needs its prefix.", name: name, labels: with(LabelClusterName, "proj", false), wantErr: true},
		"EmptyKind":         {reason: "Every object has a kind.", name: name, labels: with(LabelKind, "", false), wantErr: true},
		"BadKind":           {reason: "Kinds are identifiers.", name: name, labels: with(LabelKind, "Gate.way", false), wantErr: true},
		"DigitKind":         {reason: "Kinds start with a letter.", name: name, labels: with(LabelKind, "1Gateway", false), wantErr: true},
		"EmptyObjectName":   {reason: "Every object has a name.", name: name, labels: with(LabelName, "", false), wantErr: true},
		"BadObjectName":     {reason: "Object names are DNS-1123 subdomains.", name: name, labels: with(LabelName, "Web_1", false), wantErr: true},
		"EmptyNamespace":    {reason: "Anchors stand for namespaced objects.", name: name, labels: with(LabelNamespace, "", false), wantErr: true},
		"BadNamespace":      {reason: "Namespace names are DNS-1123 labels.", name: name, labels: with(LabelNamespace, "a.b", false), wantErr: true},
		"BadGroup":          {reason: "Groups are DNS-1123 subdomains.", name: name, labels: with(LabelGroup, "Gateway_API", false), wantErr: true},
		"InvalidLabelValue": {reason: "A value no API server would store.", name: name, labels: with(LabelName, "a/b", false), wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Decode(tc.name, tc.labels)
			if tc.wantErr {
				if err == nil {
					t.Errorf("%s\nDecode(%q, %v) = %v, want an error", tc.reason, tc.name, tc.labels, got)
				} else if !errors.Is(err, ErrMalformed) {
					t.Errorf("%s\nDecode: error %v does not wrap ErrMalformed", tc.reason, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nDecode(%q, %v): unexpected error: %v", tc.reason, tc.name, tc.labels, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nDecode: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestIsAnchor(t *testing.T) {
	anchor := func(mutate func(*corev1.ConfigMap)) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Namespace: MappedNamespace(testNSUID),
			Name:      Name(testUID),
			Labels:    testLabels(),
		}}
		mutate(cm)
		return cm
	}
	cases := map[string]struct {
		reason string
		obj    metav1.Object
		want   bool
	}{
		"Anchor": {reason: "The wire format exactly.", obj: anchor(func(*corev1.ConfigMap) {}), want: true},
		"LegacyProject": {
			reason: "Legacy cluster names are still anchors.",
			obj:    anchor(func(cm *corev1.ConfigMap) { cm.Labels[LabelClusterName] = "cluster-_proj" }), want: true,
		},
		"OwnerReferences": {
			reason: "Anchors are roots; a ConfigMap with an owner is someone's dependent.",
			obj: anchor(func(cm *corev1.ConfigMap) {
				cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: testUID}}
			}),
		},
		"WrongNamespace": {
			reason: "Anchors live only in mapped namespaces.",
			obj:    anchor(func(cm *corev1.ConfigMap) { cm.Namespace = "default" }),
		},
		"NamespaceNotUUID": {
			reason: "A mapped namespace is named after a UID.",
			obj:    anchor(func(cm *corev1.ConfigMap) { cm.Namespace = "ns-default" }),
		},
		"MissingLabel": {
			reason: "All five labels are required.",
			obj:    anchor(func(cm *corev1.ConfigMap) { delete(cm.Labels, LabelKind) }),
		},
		"BadName": {
			reason: "The name must carry the owner's UID.",
			obj:    anchor(func(cm *corev1.ConfigMap) { cm.Name = "anchor-web" }),
		},
		"Nil": {reason: "Nothing is not an anchor.", obj: nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := IsAnchor(tc.obj); got != tc.want {
				t.Errorf("%s\nIsAnchor() = %t, want %t", tc.reason, got, tc.want)
			}
		})
	}
}

func TestWithAnchorReference(t *testing.T) {
	anchor := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: Name(testUID), UID: "anchor-uid"}}
	want := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: Name(testUID), UID: "anchor-uid"}
	stale := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "anchor-" + string(testNSUID), UID: "stale-uid"}
	other := metav1.OwnerReference{APIVersion: "v1", Kind: "Secret", Name: "anchor-x", UID: "other-uid"}
	otherCM := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "settings", UID: "cm-uid"}
	controller := true
	oldCurrent := want
	oldCurrent.Controller = &controller
	oldCurrent.BlockOwnerDeletion = &controller

	cases := map[string]struct {
		reason string
		refs   []metav1.OwnerReference
		want   []metav1.OwnerReference
	}{
		"None":      {reason: "An unattached object gets the reference.", refs: nil, want: []metav1.OwnerReference{want}},
		"Current":   {reason: "Re-attaching changes nothing.", refs: []metav1.OwnerReference{otherCM, want}, want: []metav1.OwnerReference{otherCM, want}},
		"Stale":     {reason: "A previous owner's anchor is replaced in place.", refs: []metav1.OwnerReference{stale, other}, want: []metav1.OwnerReference{want, other}},
		"Both":      {reason: "Only one anchor reference remains.", refs: []metav1.OwnerReference{other, want, stale}, want: []metav1.OwnerReference{other, want}},
		"OldFields": {reason: "A reference written as controller is rewritten as non-controller.", refs: []metav1.OwnerReference{oldCurrent}, want: []metav1.OwnerReference{want}},
		"Others":    {reason: "Non-anchor references are kept, even on ConfigMaps or anchor-like names of other kinds.", refs: []metav1.OwnerReference{otherCM, other}, want: []metav1.OwnerReference{otherCM, other, want}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, withAnchorReference(tc.refs, anchor)); diff != "" {
				t.Errorf("%s\nwithAnchorReference: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}
