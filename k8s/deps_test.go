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

// The layering of the whole house, checked over `go list` of every package of both modules
// (this one and the tools' module in test/), non-test code only (tests may import what they
// need). Two tables: depRules, one row per package under k8s/ (the rules of k8s/README.md,
// "Packages and the rules that make them last"), and houseRules, one row per group of the
// other packages (docs/architecture.md, "Layers"). A package without its row, or a row
// without its package, fails, so a new package is placed when it is made. The packages are
// listed with relative patterns (./...), so the check needs no module proxy.

const (
	modulePath = "github.com/opi-bridge/opi"
	k8sPath    = modulePath + "/k8s"
)

// depRule is one k8s package's row. pkg is its path below k8s/ ("" for the root).
type depRule struct {
	pkg string
	// layer: a package imports packages of lower layers only (rule 1).
	layer int
	// sameLayer are the packages of its own layer it may import all the same.
	sameLayer []string
	// moduleDeps, when not nil, are the only packages of the opi module outside k8s/ it may
	// depend on, even indirectly (rule 3).
	moduleDeps []string
	// forbidden are import path prefixes none of its dependencies may have, even indirectly
	// (rule 3: no client in the builders; rule 4: no hook below the store).
	forbidden []string
	// testHelper: a package only tests import (the specs' shared helpers), above the root: it
	// may build the backend through the root and use the test support.
	testHelper bool
}

const internal = "internal/"

// depRules: one row per package under k8s/, bottom up.
var depRules = []depRule{
	// The public doors below everything: the names opi's objects carry (no client: a reader
	// of those names need not link one) and the client's transport wrappers (no opi package).
	{pkg: "names", layer: 0, moduleDeps: []string{"opi"}, forbidden: []string{"k8s.io/client-go"}},
	{pkg: "apiclient", layer: 0, moduleDeps: []string{}},
	{pkg: internal + "kube", layer: 1, moduleDeps: []string{"opi"}},
	// The informers of opi's caches, made without the index by namespace: client-go only.
	{pkg: internal + "informer", layer: 1, moduleDeps: []string{}},
	{pkg: internal + "objects", layer: 2, moduleDeps: []string{"opi"}, forbidden: []string{"k8s.io/client-go"}},
	{pkg: internal + "queue", layer: 2, moduleDeps: []string{}}, // client-go's workqueue only
	// The read side: nothing of the hooks (rule 4) nor of the workload kinds above it.
	{pkg: internal + "store", layer: 3, moduleDeps: []string{"opi"},
		forbidden: []string{k8sPath + "/internal/hooks", k8sPath + "/internal/workload"}},
	// The read side's one public door (the node agent, an SSH proxy): the store and the names,
	// nothing of the writes; the identity its readers' log lines carry (package loggregator).
	{pkg: "instances", layer: 4, moduleDeps: []string{"opi", "loggregator"},
		forbidden: []string{k8sPath + "/internal/hooks", k8sPath + "/internal/workload"}},
	// The read side's sources: from a typed clientset (opi, an SSH proxy, specs) or from REST
	// clients of the three groups it reads (the node agent's binary, which links no clientset).
	{pkg: "instances/clientset", layer: 5, moduleDeps: []string{"opi", "loggregator"},
		forbidden: []string{k8sPath + "/internal/hooks", k8sPath + "/internal/workload"}},
	{pkg: "instances/restsources", layer: 5, moduleDeps: []string{"opi", "loggregator"},
		forbidden: []string{k8sPath + "/internal/hooks", k8sPath + "/internal/workload", "k8s.io/client-go/kubernetes"}},
	{pkg: internal + "workload", layer: 4, moduleDeps: []string{"opi"}},
	{pkg: internal + "hooks", layer: 5, moduleDeps: []string{"opi"}},
	// What opi learns of and checks in its cluster at start-up: built on kube and the builders.
	{pkg: internal + "cluster", layer: 6, moduleDeps: []string{"opi"},
		forbidden: []string{k8sPath + "/internal/store", k8sPath + "/internal/workload", k8sPath + "/internal/hooks"}},
	{pkg: internal + "staging", layer: 6, moduleDeps: []string{"opi", "loggregator"}}, // its STG lines' envelopes
	{pkg: internal + "lrp", layer: 6, moduleDeps: []string{"opi"}},
	{pkg: internal + "task", layer: 6, moduleDeps: []string{"opi"}},
	{pkg: internal + "crash", layer: 6, moduleDeps: []string{"opi"}},
	{pkg: internal + "janitor", layer: 6, moduleDeps: []string{"opi"}},
	// gorouter's registrations: the gorouter package is the NATS client it is handed (which
	// reloads its certificate with tlsfiles and counts its requests with metrics).
	{pkg: internal + "routes", layer: 6, moduleDeps: []string{"opi", "gorouter", "tlsfiles", "metrics"}},
	// The route objects of ingress and gateway modes, shared by the LRPs carrying a route.
	{pkg: internal + "routeobjects", layer: 6, moduleDeps: []string{"opi"}},
	// The CELL lines: envelopes built by package loggregator.
	{pkg: internal + "lifecycle", layer: 6, moduleDeps: []string{"opi", "loggregator"}},
	{pkg: "", layer: 7},
	// What the backend's specs share (a fake cluster, a started backend, sample LRPs): only
	// tests import it.
	{pkg: internal + "backendtest", layer: 8, testHelper: true},
}

// houseRule is the row of a group of packages outside k8s/ (in either module).
type houseRule struct {
	// pkgs are the group's packages: paths below the module ("handler"), a path ending in
	// "/..." for it and everything below it, and "test/..." for the tools' module.
	pkgs string
	// k8s are the only packages under k8s/ its non-test code may import ("" the root).
	k8s []string
	// forbidden are module paths (with everything below them) none of its dependencies may
	// be, even indirectly.
	forbidden []string
	// testSupport: it may import testsupport/ and localkube in non-test code.
	testSupport bool
}

// The module's paths a rule names.
const (
	cmdTree     = "cmd"
	testSupport = "testsupport"
	localkube   = "localkube"
)

// houseRules: one row per group of packages outside k8s/, from the wire inward.
var houseRules = []houseRule{
	// The wire contract and its models: nothing of the backend, the HTTP layer or the commands.
	{pkgs: "models", forbidden: []string{"k8s", "handler", "bifrost", cmdTree}},
	{pkgs: "opi", forbidden: []string{"k8s", "handler", "bifrost", cmdTree}},
	// The HTTP layer and the conversion: they reach the backend only through opi/'s contract.
	{pkgs: "handler", forbidden: []string{"k8s", cmdTree}},
	{pkgs: "bifrost", forbidden: []string{"k8s", "handler", cmdTree}},
	{pkgs: "cc", forbidden: []string{"k8s", "handler", "bifrost", cmdTree}},
	{pkgs: "imageconfig", forbidden: []string{"k8s", "handler", "bifrost", cmdTree}},
	// The node agent's packages and the clients of gorouter and Loggregator sit below cmd;
	// the agent sees opi's objects only through the read side's door and the names.
	{pkgs: "agent", k8s: []string{"instances", "names"}, forbidden: []string{"handler", "bifrost", cmdTree, k8sPath}},
	{pkgs: "podlogs", forbidden: []string{"k8s", cmdTree}},
	// The SSH proxy enters the instances opi reports through the read side's door and the
	// names, and nothing of the backend's writes.
	{pkgs: "sshproxy/...", k8s: []string{"instances", "instances/clientset", "names"}, forbidden: []string{"handler", "bifrost", cmdTree, k8sPath, "agent", "gorouter"}},
	{pkgs: "loggregator", forbidden: []string{"k8s", cmdTree}},
	{pkgs: "gorouter", forbidden: []string{"k8s/internal", "k8s/instances", "handler", "bifrost", cmdTree, "agent"}},
	{pkgs: "metrics", k8s: []string{"apiclient"}, forbidden: []string{"k8s/internal", cmdTree}},
	{pkgs: "tlsfiles", forbidden: []string{"k8s", cmdTree}},
	// What a process knows of its own memory (the binary's pages it gives back): nothing of opi.
	{pkgs: "internal/residency", forbidden: []string{"k8s", "handler", "bifrost", "agent", cmdTree}},
	// The commands: opi configures the backend through its root.
	{pkgs: "cmd/opi", k8s: []string{"", "names", "apiclient"}},
	// The node agent's own binary: the agent and the read side's REST sources, nothing of the
	// backend nor the typed clientset (its size is the agent's memory).
	{pkgs: "cmd/opi-agent", k8s: []string{"instances/restsources"},
		forbidden: []string{"handler", "bifrost", "sshproxy", "gorouter", k8sPath + "/internal/hooks", k8sPath + "/internal/workload"}},
	// What the commands share (flags, logging, the ops endpoint, a kubeconfig): nothing of opi.
	{pkgs: "cmd/internal/cli", forbidden: []string{"k8s", "handler", "bifrost", "agent", "sshproxy"}},
	{pkgs: "cmd/opi-image", forbidden: []string{"k8s/internal"}},
	{pkgs: "cmd/opi-local", k8s: []string{"names"}, testSupport: true},
	// What only tests use: counterfeiter fakes, the test support, the local control plane.
	{pkgs: "fakes", forbidden: []string{"k8s", cmdTree}},
	{pkgs: testSupport + "/...", k8s: []string{"names"}, forbidden: []string{cmdTree}, testSupport: true},
	{pkgs: localkube, forbidden: []string{cmdTree}, testSupport: true},
	{pkgs: "integration", testSupport: true},
	{pkgs: "test/...", k8s: []string{"names", "apiclient", "instances/clientset"}, testSupport: true},
}

// testOnly are the packages only tests, the tools' module, cmd/opi-local and each other may
// import (rows with testSupport).
var testOnly = []string{testSupport, localkube, "fakes", "k8s/internal/backendtest"}

// listedPackage is what `go list -json` says of a package.
type listedPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// listPackages lists every package of the module in dir with its imports and dependencies.
func listPackages(dir string) ([]listedPackage, error) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "./...")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list in %s: %w: %s", dir, err, stderr.String())
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

// moduleRel is path below the module ("test/cmd/opi-bench" for the tools' module) and whether
// it is one of the module's packages.
func moduleRel(path string) (string, bool) {
	return strings.CutPrefix(path, modulePath+"/")
}

// under says rel is prefix or below it.
func under(rel, prefix string) bool { return rel == prefix || strings.HasPrefix(rel, prefix+"/") }

// isFakes says rel is a package of counterfeiter fakes beside its consumer (k8s/internal/lrp/
// lrpfakes): only tests import it, and it follows its consumer's rules by construction.
func isFakes(rel string) bool {
	return strings.HasSuffix(rel[strings.LastIndex(rel, "/")+1:], "fakes") && rel != "fakes"
}

func pkgName(rel string) string {
	if rel == "" {
		return "k8s (root)"
	}
	return "k8s/" + rel
}

// depViolations is every broken rule of the k8s packages of pkgs under rules, one line each.
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
			if dep == k8sPath && !rule.testHelper {
				out = append(out, fmt.Sprintf("%s depends on the root package k8s: nothing imports the root", pkgName(rel)))
			}
			if m, ok := moduleRel(dep); ok && rule.moduleDeps != nil {
				if _, inK8s := k8sRel(dep); !inK8s && !slices.Contains(rule.moduleDeps, m) {
					out = append(out, fmt.Sprintf("%s depends on %s: it may depend on no opi package outside k8s/ but %s",
						pkgName(rel), dep, strings.Join(rule.moduleDeps, ", ")))
				}
			}
			for _, f := range rule.forbidden {
				if under(dep, f) {
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

// covers says the row's group holds rel.
func (r houseRule) covers(rel string) bool {
	if group, ok := strings.CutSuffix(r.pkgs, "/..."); ok {
		return under(rel, group)
	}
	return rel == r.pkgs
}

// houseViolations is every broken rule of the packages outside k8s/ of pkgs, and every import
// of a test-only package from code that is not a test's, one line each.
func houseViolations(rules []houseRule, pkgs []listedPackage) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range pkgs {
		rel, ok := moduleRel(p.ImportPath)
		if !ok {
			continue
		}
		var rule *houseRule
		if _, inK8s := k8sRel(p.ImportPath); inK8s {
			// The k8s rows say the rest; only the specs' helpers use the test support.
			rule = &houseRule{pkgs: "k8s/...", k8s: []string{}, testSupport: rel == "k8s/internal/backendtest"}
		} else {
			for i := range rules {
				if rules[i].covers(rel) {
					rule = &rules[i]
					seen[rules[i].pkgs] = true
					break
				}
			}
		}
		if rule == nil {
			out = append(out, fmt.Sprintf("%s has no row in houseRules: place it", rel))
			continue
		}
		for _, imp := range p.Imports {
			irel, ok := moduleRel(imp)
			if !ok {
				continue
			}
			if k, inK8s := k8sRel(imp); inK8s && rule.pkgs != "k8s/..." && !slices.Contains(rule.k8s, k) {
				out = append(out, fmt.Sprintf("%s imports %s: of k8s/ it may import only %s", rel, pkgName(k), k8sList(rule.k8s)))
			}
			if !rule.testSupport && slices.ContainsFunc(testOnly, func(t string) bool { return under(irel, t) }) {
				out = append(out, fmt.Sprintf("%s imports %s, which only tests, test/ and cmd/opi-local may import", rel, irel))
			}
		}
		for _, dep := range p.Deps {
			drel, ok := moduleRel(dep)
			if !ok {
				continue
			}
			for _, f := range rule.forbidden {
				if under(drel, f) || dep == f {
					out = append(out, fmt.Sprintf("%s depends on %s, which it must not (%s)", rel, drel, strings.TrimPrefix(f, modulePath+"/")))
				}
			}
		}
	}
	for _, r := range rules {
		if !seen[r.pkgs] {
			out = append(out, fmt.Sprintf("houseRules has a row for %s, which has no package", r.pkgs))
		}
	}
	sort.Strings(out)
	return out
}

func k8sList(rels []string) string {
	if len(rels) == 0 {
		return "nothing"
	}
	names := make([]string, len(rels))
	for i, r := range rels {
		names[i] = pkgName(r)
	}
	return strings.Join(names, ", ")
}

var _ = Describe("the house's package dependencies", func() {
	var pkgs []listedPackage
	BeforeEach(func() {
		if pkgs != nil {
			return
		}
		for _, dir := range []string{"..", "../test"} {
			listed, err := listPackages(dir)
			Expect(err).NotTo(HaveOccurred())
			Expect(listed).NotTo(BeEmpty())
			pkgs = append(pkgs, listed...)
		}
	})

	It("keep the rules of k8s/README.md under k8s/", func() {
		Expect(depViolations(depRules, pkgs)).To(BeEmpty())
	})

	It("keep the layers of docs/architecture.md in both modules", func() {
		Expect(houseViolations(houseRules, pkgs)).To(BeEmpty())
	})

	It("keep the typed clientset out of the node agent's binary (its size is every node's memory)", func() {
		var agentDeps []string
		for _, p := range pkgs {
			if p.ImportPath == modulePath+"/cmd/opi-agent" {
				agentDeps = p.Deps
			}
		}
		Expect(agentDeps).NotTo(BeEmpty(), "cmd/opi-agent listed")
		Expect(agentDeps).NotTo(ContainElement(HavePrefix("k8s.io/client-go/kubernetes")))
	})
})

// The checkers themselves, on made-up package graphs: each rule broken once.
var _ = Describe("the layering checkers", func() {
	path := func(p string) string {
		switch {
		case strings.Contains(p, "."):
			return p
		case p == "root":
			return k8sPath
		case strings.HasPrefix(p, "k8s:"):
			return k8sPath + "/" + strings.TrimPrefix(p, "k8s:")
		default:
			return modulePath + "/" + p
		}
	}
	pkg := func(p string, imports ...string) listedPackage {
		lp := listedPackage{ImportPath: path(p)}
		for _, i := range imports {
			lp.Imports = append(lp.Imports, path(i))
			lp.Deps = append(lp.Deps, path(i))
		}
		return lp
	}
	replaced := func(graph []listedPackage, broken listedPackage) []listedPackage {
		out := slices.Clone(graph)
		for i := range out {
			if out[i].ImportPath == broken.ImportPath {
				out[i] = broken
				return out
			}
		}
		return append(out, broken)
	}

	Context("under k8s/", func() {
		rules := []depRule{
			{pkg: "names", layer: 0, moduleDeps: []string{"opi"}, forbidden: []string{"k8s.io/client-go"}},
			{pkg: "internal/kube", layer: 1, moduleDeps: []string{"opi"}},
			{pkg: "internal/objects", layer: 2, moduleDeps: []string{"opi"}, forbidden: []string{"k8s.io/client-go"}},
			{pkg: "internal/hooks", layer: 5},
			{pkg: "internal/hooks/routing", layer: 5, sameLayer: []string{"internal/hooks"}},
			{pkg: "internal/lrp", layer: 6},
			{pkg: "internal/task", layer: 6},
			{pkg: "", layer: 7},
		}
		healthy := func() []listedPackage {
			return []listedPackage{
				pkg("k8s:names", "opi", "k8s.io/api/core/v1"),
				pkg("k8s:internal/kube", "opi", "k8s.io/client-go/kubernetes"),
				pkg("k8s:internal/objects", "opi", "k8s:names", "k8s.io/api/core/v1"),
				pkg("k8s:internal/hooks", "k8s:internal/objects", "k8s:internal/kube"),
				pkg("k8s:internal/hooks/routing", "k8s:internal/hooks", "k8s:internal/objects"),
				pkg("k8s:internal/lrp", "k8s:internal/hooks", "k8s:internal/objects", "k8s:internal/kube", "metrics"),
				pkg("k8s:internal/task", "k8s:internal/objects"),
				pkg("root", "k8s:internal/lrp", "k8s:internal/task", "k8s:internal/hooks/routing"),
			}
		}
		It("finds nothing in a graph that keeps the rules", func() {
			Expect(depViolations(rules, healthy())).To(BeEmpty())
		})
		DescribeTable("finds a broken rule",
			func(broken listedPackage, want string) {
				Expect(depViolations(rules, replaced(healthy(), broken))).To(ContainElement(ContainSubstring(want)))
			},
			Entry("an import up the layers", pkg("k8s:internal/objects", "opi", "k8s:internal/lrp"),
				"k8s/internal/objects (layer 2) imports k8s/internal/lrp (layer 6)"),
			Entry("a sibling service", pkg("k8s:internal/task", "k8s:internal/lrp"),
				"k8s/internal/task (layer 6) imports k8s/internal/lrp (layer 6)"),
			Entry("a sibling hook that is not the base", pkg("k8s:internal/hooks", "k8s:internal/hooks/routing"),
				"k8s/internal/hooks (layer 5) imports k8s/internal/hooks/routing"),
			Entry("the root, indirectly", listedPackage{ImportPath: k8sPath + "/internal/task", Deps: []string{k8sPath}},
				"k8s/internal/task depends on the root package k8s"),
			Entry("a client in the names", pkg("k8s:names", "opi", "k8s.io/client-go/kubernetes"),
				"k8s/names depends on k8s.io/client-go/kubernetes, which it must not"),
			Entry("an opi package kube may not use", pkg("k8s:internal/kube", "metrics"),
				"k8s/internal/kube depends on "+modulePath+"/metrics: it may depend on no opi package outside k8s/ but opi"),
			Entry("a package without a row", pkg("k8s:internal/crash", "k8s:internal/objects"), "k8s/internal/crash has no row in depRules"),
		)
		It("finds a row without its package", func() {
			Expect(depViolations(append(rules, depRule{pkg: "internal/janitor", layer: 6}), healthy())).
				To(ContainElement("depRules has a row for k8s/internal/janitor, which does not exist"))
		})
	})

	Context("in the whole house", func() {
		rules := []houseRule{
			{pkgs: "handler", forbidden: []string{"k8s", cmdTree}},
			{pkgs: "agent", k8s: []string{"instances", "names"}, forbidden: []string{cmdTree, k8sPath}},
			{pkgs: "gorouter", forbidden: []string{"k8s/internal", cmdTree}},
			{pkgs: "cmd/opi", k8s: []string{"", "names"}},
			{pkgs: "cmd/opi-local", k8s: []string{"names"}, testSupport: true},
			{pkgs: testSupport + "/...", testSupport: true},
			{pkgs: "test/...", k8s: []string{"names"}, testSupport: true},
		}
		healthy := func() []listedPackage {
			return []listedPackage{
				pkg("handler", "opi", "models"),
				pkg("agent", "k8s:instances", "k8s:names", "podlogs"),
				pkg("gorouter", "metrics"),
				pkg("cmd/opi", "root", "k8s:names", "handler", "agent"),
				pkg("cmd/opi-local", "testsupport/fixture", "k8s:names"),
				pkg("testsupport/fixture", "testsupport/pki"),
				pkg("testsupport/pki"),
				pkg("test/cmd/opi-bench", "testsupport/fixture", "k8s:names"),
				pkg("root", "k8s:internal/lrp"),
			}
		}
		It("finds nothing in a graph that keeps the rules", func() {
			Expect(houseViolations(rules, healthy())).To(BeEmpty())
		})
		DescribeTable("finds a broken rule",
			func(broken listedPackage, want string) {
				Expect(houseViolations(rules, replaced(healthy(), broken))).To(ContainElement(ContainSubstring(want)))
			},
			Entry("the HTTP layer reaching the backend", listedPackage{ImportPath: path("handler"), Deps: []string{path("k8s:internal/store")}},
				"handler depends on k8s/internal/store, which it must not (k8s)"),
			Entry("the agent importing the backend's root", pkg("agent", "root"),
				"agent imports k8s (root): of k8s/ it may import only k8s/instances, k8s/names"),
			Entry("gorouter above cmd", listedPackage{ImportPath: path("gorouter"), Deps: []string{path("cmd/opi")}},
				"gorouter depends on cmd/opi, which it must not (cmd)"),
			Entry("a command importing the test support", pkg("cmd/opi", "root", "testsupport/pki"),
				"cmd/opi imports testsupport/pki, which only tests, test/ and cmd/opi-local may import"),
			Entry("a package without a row", pkg("podlogs"), "podlogs has no row in houseRules"),
		)
		It("finds a row without its packages", func() {
			Expect(houseViolations(append(rules, houseRule{pkgs: "cc"}), healthy())).
				To(ContainElement("houseRules has a row for cc, which has no package"))
		})
	})
})
