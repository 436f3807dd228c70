package k8s_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// The dependency rules of k8s/README.md ("Packages and the rules that make them last"), checked
// over `go list -deps` of every package under k8s/ (non-test code: tests may import what they
// need). Each package under k8s/ has one row; a package without a row, or a row without a
// package, fails, so an extraction adds its row here.

const (
	modulePath = "github.com/opi-bridge/opi"
	k8sPath    = modulePath + "/k8s"
)

// depRule is one package's row. pkg is its path below k8s/ ("" for the root).
type depRule struct {
	pkg string
	// layer: a package imports packages of lower layers only (rule 1).
	layer int
	// sameLayer are the packages of its own layer it may import all the same (a hook concern and
	// the hook base).
	sameLayer []string
	// moduleDeps, when not nil, are the only packages of the opi module outside k8s/ it may
	// depend on, even indirectly (rule 3).
	moduleDeps []string
	// forbidden are import path prefixes none of its dependencies may have, even indirectly
	// (rule 3: no client in the builders; rule 4: no hook below the store).
	forbidden []string
}

// depRules: one row per package under k8s/, bottom up.
var depRules = []depRule{
	{pkg: "kube", layer: 0, moduleDeps: []string{"opi"}},
	{pkg: "spec", layer: 1, moduleDeps: []string{"opi"}, forbidden: []string{"k8s.io/client-go"}},
	{pkg: "queue", layer: 1, moduleDeps: []string{}}, // no opi package at all: client-go's workqueue only
	// The read side: nothing of the hooks (rule 4) nor of the workload kinds above it.
	{pkg: "store", layer: 2, moduleDeps: []string{"opi"}, forbidden: []string{k8sPath + "/hooks", k8sPath + "/workload"}},
	{pkg: "workload", layer: 3, moduleDeps: []string{"opi"}},
	{pkg: "hooks", layer: 4, moduleDeps: []string{"opi"}},
	// What opi learns of and checks in its cluster at start-up (cmd/opi calls it before the
	// backend is made): beside the services, built on kube and spec alone.
	{pkg: "cluster", layer: 5, moduleDeps: []string{"opi"},
		forbidden: []string{k8sPath + "/store", k8sPath + "/workload", k8sPath + "/hooks"}},
	{pkg: "staging", layer: 5, moduleDeps: []string{"opi", "loggregator"}}, // its STG lines' envelopes
	{pkg: "lrp", layer: 5, moduleDeps: []string{"opi"}},
	{pkg: "task", layer: 5, moduleDeps: []string{"opi"}},
	{pkg: "crash", layer: 5, moduleDeps: []string{"opi"}},
	{pkg: "janitor", layer: 5, moduleDeps: []string{"opi"}},
	// Leader work on the shared informers: gorouter's registrations (the gorouter package is
	// the NATS client it is handed; it reloads its client certificate with tlsfiles).
	{pkg: "routes", layer: 5, moduleDeps: []string{"opi", "gorouter", "tlsfiles"}},
	// The CELL lines of the leader: envelopes built and handed to an emitter by package loggregator.
	{pkg: "lifecycle", layer: 5, moduleDeps: []string{"opi", "loggregator"}},
	{pkg: "", layer: 6},
}

// listedPackage is what `go list -json` says of a package.
type listedPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// listK8sPackages lists every package under k8s/ with its imports and dependencies.
func listK8sPackages() ([]listedPackage, error) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", k8sPath+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("decode go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}

// k8sRel is path below k8s/ ("" for the root) and whether it is under k8s/ at all.
func k8sRel(path string) (string, bool) {
	if path == k8sPath {
		return "", true
	}
	rel, ok := strings.CutPrefix(path, k8sPath+"/")
	return rel, ok
}

// isFakes says rel is a package of counterfeiter fakes beside its consumer (k8s/lrp/lrpfakes):
// only tests import it, and it follows its consumer's rules by construction.
func isFakes(rel string) bool {
	return strings.HasSuffix(rel[strings.LastIndex(rel, "/")+1:], "fakes")
}

func pkgName(rel string) string {
	if rel == "" {
		return "k8s (root)"
	}
	return "k8s/" + rel
}

// depViolations is every broken rule of pkgs under rules, one line each.
func depViolations(rules []depRule, pkgs []listedPackage) []string {
	byPkg := map[string]depRule{}
	for _, r := range rules {
		byPkg[r.pkg] = r
	}
	var out []string
	seen := map[string]bool{}
	for _, p := range pkgs {
		rel, ok := k8sRel(p.ImportPath)
		if !ok || isFakes(rel) {
			continue
		}
		seen[rel] = true
		rule, ok := byPkg[rel]
		if !ok {
			out = append(out, fmt.Sprintf("%s has no row in depRules: give it its layer", pkgName(rel)))
			continue
		}
		for _, imp := range p.Imports {
			irel, ok := k8sRel(imp)
			if !ok {
				continue
			}
			irule, known := byPkg[irel]
			switch {
			case !known:
				out = append(out, fmt.Sprintf("%s imports %s, which has no row in depRules", pkgName(rel), pkgName(irel)))
			case irule.layer > rule.layer, irule.layer == rule.layer && !slices.Contains(rule.sameLayer, irel):
				out = append(out, fmt.Sprintf("%s (layer %d) imports %s (layer %d): dependencies point down the layers",
					pkgName(rel), rule.layer, pkgName(irel), irule.layer))
			}
		}
		for _, dep := range p.Deps {
			if dep == k8sPath {
				out = append(out, fmt.Sprintf("%s depends on the root package k8s: nothing imports the root", pkgName(rel)))
			}
			if m, ok := strings.CutPrefix(dep, modulePath+"/"); ok && rule.moduleDeps != nil {
				if _, inK8s := k8sRel(dep); !inK8s && !slices.Contains(rule.moduleDeps, m) {
					out = append(out, fmt.Sprintf("%s depends on %s: it may depend on no opi package outside k8s/ but %s",
						pkgName(rel), dep, strings.Join(rule.moduleDeps, ", ")))
				}
			}
			for _, f := range rule.forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					out = append(out, fmt.Sprintf("%s depends on %s, which it must not (%s)", pkgName(rel), dep, f))
				}
			}
		}
	}
	for _, r := range rules {
		if !seen[r.pkg] {
			out = append(out, fmt.Sprintf("depRules has a row for %s, which does not exist", pkgName(r.pkg)))
		}
	}
	sort.Strings(out)
	return out
}

var _ = Describe("the backend's package dependencies", func() {
	It("keep the rules of k8s/README.md", func() {
		pkgs, err := listK8sPackages()
		Expect(err).NotTo(HaveOccurred())
		Expect(pkgs).NotTo(BeEmpty())
		Expect(depViolations(depRules, pkgs)).To(BeEmpty())
	})

	// The checker itself, on made-up package graphs: each rule broken once.
	rules := []depRule{
		{pkg: "kube", layer: 0, moduleDeps: []string{"opi"}},
		{pkg: "spec", layer: 1, moduleDeps: []string{"opi"}, forbidden: []string{"k8s.io/client-go"}},
		{pkg: "hooks", layer: 4},
		{pkg: "hooks/routing", layer: 4, sameLayer: []string{"hooks"}},
		{pkg: "lrp", layer: 5},
		{pkg: "task", layer: 5},
		{pkg: "", layer: 6},
	}
	pkg := func(rel string, imports ...string) listedPackage {
		p := listedPackage{ImportPath: k8sPath}
		if rel != "" {
			p.ImportPath += "/" + rel
		}
		for _, i := range imports {
			if !strings.Contains(i, ".") {
				if i == "root" {
					i = k8sPath
				} else if i == "opi" || i == "metrics" {
					i = modulePath + "/" + i
				} else {
					i = k8sPath + "/" + i
				}
			}
			p.Imports = append(p.Imports, i)
			p.Deps = append(p.Deps, i)
		}
		return p
	}
	// healthy is a graph that keeps every rule of rules.
	healthy := func() []listedPackage {
		return []listedPackage{
			pkg("kube", "opi", "k8s.io/client-go/kubernetes"),
			pkg("spec", "opi", "k8s.io/api/core/v1"),
			pkg("hooks", "spec", "kube"),
			pkg("hooks/routing", "hooks", "spec"),
			pkg("lrp", "hooks", "spec", "kube", "metrics"),
			pkg("task", "spec"),
			pkg("", "lrp", "task", "hooks/routing"),
		}
	}
	It("finds nothing in a graph that keeps the rules", func() {
		Expect(depViolations(rules, healthy())).To(BeEmpty())
	})
	DescribeTable("finds a broken rule",
		func(broken listedPackage, want string) {
			pkgs := healthy()
			for i := range pkgs {
				if pkgs[i].ImportPath == broken.ImportPath {
					pkgs[i] = broken
				}
			}
			if !slices.ContainsFunc(pkgs, func(p listedPackage) bool { return p.ImportPath == broken.ImportPath }) {
				pkgs = append(pkgs, broken)
			}
			Expect(depViolations(rules, pkgs)).To(ContainElement(ContainSubstring(want)))
		},
		Entry("an import up the layers", pkg("spec", "opi", "lrp"), "k8s/spec (layer 1) imports k8s/lrp (layer 5)"),
		Entry("a sibling service", pkg("task", "lrp"), "k8s/task (layer 5) imports k8s/lrp (layer 5)"),
		Entry("a sibling hook that is not the base", pkg("hooks", "hooks/routing"), "k8s/hooks (layer 4) imports k8s/hooks/routing"),
		Entry("the root, indirectly", listedPackage{ImportPath: k8sPath + "/task", Deps: []string{k8sPath}},
			"k8s/task depends on the root package k8s"),
		Entry("a client below the store", pkg("spec", "opi", "k8s.io/client-go/kubernetes"),
			"k8s/spec depends on k8s.io/client-go/kubernetes, which it must not"),
		Entry("an opi package kube may not use", pkg("kube", "metrics"),
			"k8s/kube depends on "+modulePath+"/metrics: it may depend on no opi package outside k8s/ but opi"),
		Entry("a package without a row", pkg("crash", "spec"), "k8s/crash has no row in depRules"),
	)
	It("finds a row without its package", func() {
		Expect(depViolations(append(rules, depRule{pkg: "janitor", layer: 5}), healthy())).
			To(ContainElement("depRules has a row for k8s/janitor, which does not exist"))
	})
})
