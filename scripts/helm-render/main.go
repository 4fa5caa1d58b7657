// helm-render renders a Helm chart's templates the way `helm template` does,
// with the same engine Helm uses (Go's text/template and the sprig function
// library), for machines without a helm binary. It implements what the
// Aileron chart uses: .Values (values.yaml coalesced with -f files), .Release,
// .Chart, .Capabilities, .Template, named templates, include, tpl, toYaml,
// fromYaml, toJson, fromJson, required, fail and lookup (empty, as in
// `helm template`). It does not validate values against values.schema.json,
// sort objects by kind, or load subcharts.
//
//	helm-render [-f values.yaml]... [-name aileron] [-namespace default]
//	            [-kube-version 1.30.0] [-api-versions group/version,...]
//	            [-upgrade] [-notes] <chart>
//
// Prints every object as YAML documents, each after a `# Source:` comment
// naming its template; with -notes, templates/NOTES.txt rendered instead.
// Exit status 1 with the engine's message when a template fails (required,
// fail, a bad expression).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"gopkg.in/yaml.v3"
)

type chartMetadata struct {
	APIVersion  string `yaml:"apiVersion"`
	Name        string `yaml:"name"`
	Version     string `yaml:"version"`
	AppVersion  string `yaml:"appVersion"`
	Description string `yaml:"description"`
	Type        string `yaml:"type"`
	KubeVersion string `yaml:"kubeVersion"`
	Home        string `yaml:"home"`
}

// Chart is .Chart: Helm exposes the metadata with Go field names.
type Chart struct {
	APIVersion  string
	Name        string
	Version     string
	AppVersion  string
	Description string
	Type        string
	KubeVersion string
	Home        string
}

type Release struct {
	Name      string
	Namespace string
	IsInstall bool
	IsUpgrade bool
	Revision  int
	Service   string
}

type KubeVersion struct {
	Version    string
	Major      string
	Minor      string
	GitVersion string
}

func (v KubeVersion) String() string { return v.Version }

// VersionSet is .Capabilities.APIVersions.
type VersionSet []string

func (s VersionSet) Has(apiVersion string) bool {
	for _, v := range s {
		if v == apiVersion {
			return true
		}
	}
	return false
}

type Capabilities struct {
	KubeVersion  KubeVersion
	APIVersions  VersionSet
	HelmVersion  map[string]string
}

type TemplateInfo struct {
	Name     string
	BasePath string
}

type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// The API versions every supported cluster serves, as helm template assumes.
var defaultAPIVersions = []string{
	"v1", "apps/v1", "batch/v1", "autoscaling/v1", "autoscaling/v2", "policy/v1",
	"networking.k8s.io/v1", "rbac.authorization.k8s.io/v1", "storage.k8s.io/v1",
}

func main() {
	var valueFiles, apiVersions stringList
	name := flag.String("name", "aileron", "release name")
	namespace := flag.String("namespace", "default", "release namespace")
	kubeVersion := flag.String("kube-version", "1.30.0", "Kubernetes version for .Capabilities")
	upgrade := flag.Bool("upgrade", false, "render as an upgrade (.Release.IsUpgrade)")
	notes := flag.Bool("notes", false, "print templates/NOTES.txt rendered, instead of the objects")
	flag.Var(&valueFiles, "f", "values file (repeatable; later files win)")
	flag.Var(&apiVersions, "api-versions", "API versions the cluster serves besides the built-in ones (repeatable, comma-separated)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: helm-render [-f values.yaml]... [-name n] [-namespace ns] [-kube-version v] [-api-versions g/v,...] [-upgrade] [-notes] <chart>")
		os.Exit(2)
	}
	out, err := render(flag.Arg(0), options{
		valueFiles:  valueFiles,
		name:        *name,
		namespace:   *namespace,
		kubeVersion: *kubeVersion,
		apiVersions: splitAll(apiVersions),
		upgrade:     *upgrade,
		notes:       *notes,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "Error: %v\n", err)
		os.Exit(1)
	}
	fmt.Print(out)
}

type options struct {
	valueFiles  []string
	name        string
	namespace   string
	kubeVersion string
	apiVersions []string
	upgrade     bool
	notes       bool
}

func splitAll(values []string) []string {
	var out []string
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

func render(chartDir string, opts options) (string, error) {
	var meta chartMetadata
	if err := readYAML(filepath.Join(chartDir, "Chart.yaml"), &meta); err != nil {
		return "", err
	}
	if meta.Name == "" || meta.Version == "" {
		return "", fmt.Errorf("%s: name and version are required", filepath.Join(chartDir, "Chart.yaml"))
	}
	values := map[string]interface{}{}
	if err := readYAML(filepath.Join(chartDir, "values.yaml"), &values); err != nil {
		return "", err
	}
	for _, file := range opts.valueFiles {
		override := map[string]interface{}{}
		if err := readYAML(file, &override); err != nil {
			return "", err
		}
		values = coalesce(override, values)
	}
	caps, err := capabilities(opts.kubeVersion, opts.apiVersions)
	if err != nil {
		return "", err
	}
	top := map[string]interface{}{
		"Values": values,
		"Chart": Chart{
			APIVersion: meta.APIVersion, Name: meta.Name, Version: meta.Version, AppVersion: meta.AppVersion,
			Description: meta.Description, Type: meta.Type, KubeVersion: meta.KubeVersion, Home: meta.Home,
		},
		"Release": Release{
			Name: opts.name, Namespace: opts.namespace, IsInstall: !opts.upgrade, IsUpgrade: opts.upgrade,
			Revision: map[bool]int{false: 1, true: 2}[opts.upgrade], Service: "Helm",
		},
		"Capabilities": caps,
	}

	files, err := templateFiles(chartDir, meta.Name)
	if err != nil {
		return "", err
	}
	root := template.New("gotpl").Option("missingkey=zero")
	root.Funcs(funcMap(root))
	names := make([]string, 0, len(files))
	for name, text := range files {
		names = append(names, name)
		if _, err := root.New(name).Parse(text); err != nil {
			return "", err
		}
	}
	sort.Strings(names)

	var out strings.Builder
	for _, name := range names {
		base := path.Base(name)
		isNotes := base == "NOTES.txt"
		if strings.HasPrefix(base, "_") || isNotes != opts.notes {
			continue
		}
		data := withTemplate(top, name, meta.Name)
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, data); err != nil {
			return "", cleanError(err)
		}
		// what Helm does with missingkey=zero: an absent value prints nothing
		text := strings.ReplaceAll(buf.String(), "<no value>", "")
		if isNotes {
			out.WriteString(text)
			continue
		}
		for _, doc := range splitDocuments(text) {
			fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", name, doc)
		}
	}
	return out.String(), nil
}

func withTemplate(top map[string]interface{}, name, chart string) map[string]interface{} {
	data := make(map[string]interface{}, len(top)+1)
	for k, v := range top {
		data[k] = v
	}
	data["Template"] = TemplateInfo{Name: name, BasePath: chart + "/templates"}
	return data
}

var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// splitDocuments drops the documents that hold nothing but blanks and comments, as Helm does.
func splitDocuments(text string) []string {
	var docs []string
	for _, doc := range documentSeparator.Split(text, -1) {
		trimmed := strings.TrimSpace(doc)
		meaningful := false
		for _, line := range strings.Split(trimmed, "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				meaningful = true
				break
			}
		}
		if meaningful {
			docs = append(docs, trimmed)
		}
	}
	return docs
}

// templateFiles reads templates/ (recursively), named as Helm names them: <chart>/templates/<path>.
func templateFiles(chartDir, chart string) (map[string]string, error) {
	files := map[string]string{}
	dir := filepath.Join(chartDir, "templates")
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		text, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[path.Join(chart, "templates", filepath.ToSlash(rel))] = string(text)
		return nil
	})
	return files, err
}

func funcMap(root *template.Template) template.FuncMap {
	funcs := sprig.TxtFuncMap()
	// Helm leaves these out: a chart must not read the environment of whoever renders it
	delete(funcs, "env")
	delete(funcs, "expandenv")
	funcs["toYaml"] = toYAML
	funcs["fromYaml"] = fromYAML
	funcs["toJson"] = toJSON
	funcs["fromJson"] = fromJSON
	funcs["required"] = func(message string, value interface{}) (interface{}, error) {
		if value == nil {
			return nil, errors.New(message)
		}
		if s, ok := value.(string); ok && s == "" {
			return nil, errors.New(message)
		}
		return value, nil
	}
	funcs["fail"] = func(message string) (string, error) { return "", errors.New(message) }
	funcs["lookup"] = func(apiVersion, kind, namespace, name string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	funcs["include"] = func(name string, data interface{}) (string, error) {
		var buf bytes.Buffer
		if err := root.ExecuteTemplate(&buf, name, data); err != nil {
			return "", err
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	funcs["tpl"] = func(text string, data interface{}) (string, error) {
		clone, err := root.Clone()
		if err != nil {
			return "", err
		}
		t, err := clone.New("tpl").Parse(text)
		if err != nil {
			return "", err
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, data); err != nil {
			return "", err
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	return funcs
}

func toYAML(v interface{}) string {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		// Helm's toYaml swallows the error the same way
		return ""
	}
	_ = enc.Close()
	return strings.TrimSuffix(buf.String(), "\n")
}

func fromYAML(text string) map[string]interface{} {
	out := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(text), &out); err != nil {
		out["Error"] = err.Error()
	}
	return out
}

func toJSON(v interface{}) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(data)
}

func fromJSON(text string) map[string]interface{} {
	out := map[string]interface{}{}
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		out["Error"] = err.Error()
	}
	return out
}

// coalesce lays override over base as Helm merges values files: maps merge
// key by key, anything else replaces, and null removes the key.
func coalesce(override, base map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(base))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range override {
		if v == nil {
			delete(out, k)
			continue
		}
		overrideMap, isMap := v.(map[string]interface{})
		baseMap, baseIsMap := out[k].(map[string]interface{})
		if isMap && baseIsMap {
			out[k] = coalesce(overrideMap, baseMap)
		} else {
			out[k] = v
		}
	}
	return out
}

var kubeVersionPattern = regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)$`)

func capabilities(kubeVersion string, extra []string) (Capabilities, error) {
	m := kubeVersionPattern.FindStringSubmatch(kubeVersion)
	if m == nil {
		return Capabilities{}, fmt.Errorf("-kube-version %q: want MAJOR.MINOR.PATCH", kubeVersion)
	}
	version := fmt.Sprintf("v%s.%s.%s", m[1], m[2], m[3])
	return Capabilities{
		KubeVersion: KubeVersion{Version: version, Major: m[1], Minor: m[2], GitVersion: version},
		APIVersions: append(append(VersionSet{}, defaultAPIVersions...), extra...),
		HelmVersion: map[string]string{"version": "v3"},
	}, nil
}

func readYAML(file string, into interface{}) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		return fmt.Errorf("%s: %v", file, err)
	}
	return nil
}

// cleanError keeps the engine's message and the template it names, without the call chain's noise.
func cleanError(err error) error {
	return errors.New(strings.TrimPrefix(err.Error(), "template: "))
}
