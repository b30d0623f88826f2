package config

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"anchorage/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the ### Reference section of docs/operations.md from the type")

// The generated section: from referenceHeading to the next "## " heading.
const (
	referenceHeading = "### Reference\n"
	regenerate       = "go test ./pkg/config -run TestReference -update"
)

// TestReference: the configuration reference in docs/operations.md is the type rendered
// (key, type, default, what it decides), so the documented keys and defaults are the
// binary's.
func TestReference(t *testing.T) {
	path := filepath.Join(testenv.RepoRoot(), "docs", "operations.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(doc), "\n"+referenceHeading)
	if start < 0 {
		t.Fatalf("docs/operations.md has no %q section", strings.TrimSpace(referenceHeading))
	}
	start++
	end := strings.Index(string(doc[start:]), "\n## ")
	if end < 0 {
		t.Fatal("the reference section runs to the end of docs/operations.md: want a ## heading after it")
	}
	end += start + 1
	want := renderReference(t)
	if got := string(doc[start:end]); got == want {
		return
	} else if !*update {
		t.Fatalf("the configuration reference in docs/operations.md differs from the type (-doc +type); run `%s`:\n%s", regenerate, cmp.Diff(got, want))
	}
	if err := os.WriteFile(path, []byte(string(doc[:start])+want+string(doc[end:])), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("rewrote the configuration reference in %s", path)
}

// renderReference renders the section: a row per key, in the type's order.
func renderReference(t *testing.T) string {
	docs := fieldDocs(t)
	var b strings.Builder
	b.WriteString(referenceHeading)
	fmt.Fprintf(&b, "\n<!-- Generated from pkg/config's type by `%s`: change a key's doc comment there, not here. -->\n\n", regenerate)
	b.WriteString("| key | type | default | what it decides |\n|---|---|---|---|\n")
	var walk func(prefix string, v reflect.Value)
	walk = func(prefix string, v reflect.Value) {
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" { // TypeMeta
				continue
			}
			key, value := prefix+name, v.Field(i)
			meaning := docs[v.Type().Name()+"."+f.Name]
			if rest, ok := strings.CutPrefix(meaning, f.Name+" "); ok {
				meaning = "`" + name + "` " + rest
			} else if rest, ok := strings.CutPrefix(meaning, f.Name+": "); ok {
				meaning = rest
			}
			if value.Kind() == reflect.Struct && value.Type() != reflect.TypeFor[metav1.Duration]() {
				fmt.Fprintf(&b, "| `%s` | section | | %s |\n", key, meaning)
				walk(key+".", value)
				continue
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", key, typeName(f.Type), defaultOf(value), strings.ReplaceAll(meaning, "|", `\|`))
		}
	}
	walk("", reflect.ValueOf(Default()))
	return b.String()
}

func typeName(t reflect.Type) string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[metav1.Duration]():
		return "duration"
	case t.Kind() == reflect.Slice:
		return "list of " + typeName(t.Elem()) + "s"
	case t.Kind() == reflect.Int:
		return "integer"
	case t.Kind() == reflect.Float32 || t.Kind() == reflect.Float64:
		return "number"
	}
	return t.Kind().String()
}

func defaultOf(v reflect.Value) string {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return "absent"
		}
		v = v.Elem()
	}
	switch x := v.Interface().(type) {
	case metav1.Duration:
		return "`" + x.Duration.String() + "`"
	case []RetryInterval:
		var steps []string
		for _, r := range x {
			step := r.Interval.Duration.String()
			if r.MaxElapsed != nil {
				step += " while pending up to " + r.MaxElapsed.Duration.String()
			}
			steps = append(steps, step)
		}
		return "`" + strings.Join(steps, "`, then `") + "`"
	case []string:
		if len(x) == 0 {
			return "`[]`"
		}
		return "`" + strings.Join(x, "`, `") + "`"
	}
	return fmt.Sprintf("`%v`", v.Interface())
}

// fieldDocs returns the doc comment of every struct field in the package's non-test
// files, by "Type.Field", on one line.
func fieldDocs(t *testing.T) map[string]string {
	fset := token.NewFileSet()
	out := map[string]string{}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			if st, ok := ts.Type.(*ast.StructType); ok {
				for _, field := range st.Fields.List {
					for _, id := range field.Names {
						out[ts.Name.Name+"."+id.Name] = strings.Join(strings.Fields(field.Doc.Text()), " ")
					}
				}
			}
			return false
		})
	}
	return out
}
