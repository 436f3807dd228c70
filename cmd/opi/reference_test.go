package main

import (
	"encoding/json"
	"io"
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/yaml"
)

// referencePath is the configuration reference, from this package's folder.
const referencePath = "../../docs/configuration.md"

// referenceRow is one row of the reference's `| key | flag | default | meaning |` tables.
type referenceRow struct {
	line    string
	keys    []string // the backticked keys of the first cell
	flags   []string // the --flags of the second cell, without their dashes
	meaning string   // the rest of the row
}

var (
	backticked = regexp.MustCompile("`([^`]+)`")
	flagName   = regexp.MustCompile(`--([a-z0-9][a-z0-9-]*)`)
	usageFlag  = regexp.MustCompile(`(?m)^  -([A-Za-z0-9][A-Za-z0-9-]*)`)
)

// referenceRows reads the rows of every table in doc whose header is `| key | flag | ...`.
func referenceRows(doc string) []referenceRow {
	var rows []referenceRow
	inTable := false
	for _, line := range strings.Split(doc, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 3 {
			continue
		}
		first, second := strings.TrimSpace(cells[0]), strings.TrimSpace(cells[1])
		switch {
		case first == "key" && second == "flag":
			inTable = true
			continue
		case !inTable, strings.HasPrefix(first, "---"):
			continue
		}
		row := referenceRow{line: line, meaning: strings.Join(cells[2:], "|")}
		for _, m := range backticked.FindAllStringSubmatch(first, -1) {
			row.keys = append(row.keys, m[1])
		}
		for _, m := range flagName.FindAllStringSubmatch(second, -1) {
			row.flags = append(row.flags, m[1])
		}
		rows = append(rows, row)
	}
	return rows
}

var jsonUnmarshaler = reflect.TypeFor[json.Unmarshaler]()

// configKeys walks t as sigs.k8s.io/yaml reads the config file (through encoding/json): a
// field's json name is its key, a struct is a section (`section.key`), an embedded struct
// without a name is flattened into its parent, and a type that unmarshals itself (Duration) is
// one key. It returns every key, and for the keys holding a list of structs the keys of one entry.
func configKeys(t reflect.Type, prefix string, keys map[string][]string) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			configKeys(ft, prefix, keys)
			continue
		}
		if name == "" {
			name = f.Name
		}
		key := prefix + name
		if ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(jsonUnmarshaler) {
			configKeys(ft, key+".", keys)
			continue
		}
		keys[key] = nil
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
			entry := map[string][]string{}
			configKeys(ft.Elem(), "", entry)
			for k := range entry {
				keys[key] = append(keys[key], k)
			}
			sort.Strings(keys[key])
		}
	}
}

// connectFlags lists the flags `opi connect` defines, from its own usage text.
func connectFlags() []string {
	return usageFlags(func(args []string) error {
		cfg := DefaultConfig()
		_, err := parseFlags(args, &cfg)
		return err
	})
}

// usageFlags lists the flags a command's parse defines, from the usage text it prints for -h.
func usageFlags(parse func(args []string) error) []string {
	r, w, err := os.Pipe()
	Expect(err).NotTo(HaveOccurred())
	stderr := os.Stderr
	os.Stderr = w
	read := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		read <- b
	}()
	parseErr := parse([]string{"-h"})
	os.Stderr = stderr
	Expect(w.Close()).To(Succeed())
	usage := <-read
	Expect(r.Close()).To(Succeed())
	Expect(parseErr).To(HaveOccurred(), "-h asks for the usage text")

	var flags []string
	for _, m := range usageFlag.FindAllStringSubmatch(string(usage), -1) {
		flags = append(flags, m[1])
	}
	sort.Strings(flags)
	return flags
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// nestedYAML is a config file setting key (`a.b.c`) to null.
func nestedYAML(key string) string {
	var b strings.Builder
	for depth, part := range strings.Split(key, ".") {
		b.WriteString("\n" + strings.Repeat("  ", depth) + part + ":")
	}
	return b.String() + " null\n"
}

var _ = Describe("The configuration reference (docs/configuration.md)", func() {
	var (
		rows []referenceRow
		keys map[string][]string
	)

	BeforeEach(func() {
		doc, err := os.ReadFile(referencePath)
		Expect(err).NotTo(HaveOccurred())
		rows = referenceRows(string(doc))
		Expect(rows).NotTo(BeEmpty(), "no `| key | flag | default | meaning |` table in %s", referencePath)
		keys = map[string][]string{}
		configKeys(reflect.TypeFor[Config](), "", keys)
	})

	It("walks the keys as the config file is read", func() {
		// The walk itself is checked against the parser: every key it finds is one the file may
		// set (null leaves any field as it is; a type's own complaint about null is no matter),
		// and a key that is not one is refused as unknown.
		for _, key := range sortedKeys(keys) {
			cfg := DefaultConfig()
			err := yaml.UnmarshalStrict([]byte(nestedYAML(key)), &cfg)
			if err != nil {
				Expect(err.Error()).NotTo(ContainSubstring("unknown field"), "key %s", key)
			}
		}
		cfg := DefaultConfig()
		Expect(yaml.UnmarshalStrict([]byte(nestedYAML("kubernetes.no_such_key")), &cfg)).To(MatchError(ContainSubstring("unknown field")))
		Expect(keys).To(HaveKey("kubernetes.routing"), "inlined sections read as their parent's keys")
		Expect(keys).To(HaveKey("staging.refused_cidrs"))
	})

	It("has a row for every key of the config file, and names only real keys", func() {
		// When this fails: a field was added to Config (or a section of it) without a row in
		// docs/configuration.md, or a row names a key the file does not have (renamed, removed,
		// or missing its section's prefix). Rows name full keys: `section.key`.
		documented := map[string]bool{}
		var unknown, twice []string
		for _, row := range rows {
			Expect(row.keys).NotTo(BeEmpty(), "a row names no key: %s", row.line)
			for _, k := range row.keys {
				if _, ok := keys[k]; !ok {
					unknown = append(unknown, k)
				}
				if documented[k] {
					twice = append(twice, k)
				}
				documented[k] = true
			}
		}
		Expect(unknown).To(BeEmpty(), "%s names keys the config file does not have", referencePath)
		Expect(twice).To(BeEmpty(), "keys with two rows in %s", referencePath)
		var missing []string
		for _, k := range sortedKeys(keys) {
			if !documented[k] {
				missing = append(missing, k)
			}
		}
		Expect(missing).To(BeEmpty(), "keys of the config file without a row in %s", referencePath)
	})

	It("names the keys of a list's entries in that list's row", func() {
		for _, row := range rows {
			for _, k := range row.keys {
				for _, entryKey := range keys[k] {
					Expect(row.meaning).To(ContainSubstring("`"+entryKey+"`"), "the row of %s does not name its entries' key %q", k, entryKey)
				}
			}
		}
	})

	It("names every flag of opi connect, and only real flags", func() {
		// When this fails: a flag was added to parseFlags (or a section's bindFlags) without
		// being named in the flag column of its key's row, or a row names a flag opi does not
		// have. --config, which is no key, is named in the text.
		flags := connectFlags()
		Expect(flags).To(ContainElements("listen", "config", "staging-refused-cidrs", "router"))
		defined := map[string]bool{}
		for _, f := range flags {
			defined[f] = true
		}
		named := map[string]bool{}
		var unknown []string
		for _, row := range rows {
			for _, f := range row.flags {
				if !defined[f] {
					unknown = append(unknown, "--"+f)
				}
				named[f] = true
			}
		}
		Expect(unknown).To(BeEmpty(), "%s names flags opi connect does not have", referencePath)
		doc, err := os.ReadFile(referencePath)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(doc)).To(ContainSubstring("--config"))
		var missing []string
		for _, f := range flags {
			if !named[f] && f != "config" {
				missing = append(missing, "--"+f)
			}
		}
		Expect(missing).To(BeEmpty(), "flags of opi connect named in no row of %s", referencePath)
	})
})

// sshGuidePath is the SSH proxy's guide, whose settings table is a `| key | flag | ...` table.
const sshGuidePath = "../../docs/ssh.md"

var _ = Describe("The SSH proxy's settings in docs/ssh.md", func() {
	It("has a row for every key and flag of opi ssh-proxy, and names only real ones", func() {
		// When this fails: a field of SSHProxyConfig or a flag of parseSSHProxyFlags was added
		// without its row in the guide's settings table, or a row names one that went away.
		doc, err := os.ReadFile(sshGuidePath)
		Expect(err).NotTo(HaveOccurred())
		var documentedKeys, documentedFlags []string
		for _, row := range referenceRows(string(doc)) {
			documentedKeys = append(documentedKeys, row.keys...)
			documentedFlags = append(documentedFlags, row.flags...)
		}
		keys := map[string][]string{}
		configKeys(reflect.TypeFor[SSHProxyConfig](), "", keys)
		Expect(keys).To(HaveKey("loggregator.tls.ca_file"))
		Expect(documentedKeys).To(ConsistOf(sortedKeys(keys)))

		flags := usageFlags(func(args []string) error {
			cfg := DefaultSSHProxyConfig()
			_, err := parseSSHProxyFlags(args, &cfg)
			return err
		})
		Expect(flags).To(ContainElements("config", "host-key", "loggregator-addr"))
		Expect(documentedFlags).To(ConsistOf(flags))
	})
})
