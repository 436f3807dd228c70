package main

import (
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("task configuration", func() {
	writeConfig := func(yaml string) string {
		path := filepath.Join(GinkgoT().TempDir(), "opi.yml")
		Expect(os.WriteFile(path, []byte(yaml), 0o600)).To(Succeed())
		return path
	}

	It("defaults to 1 GiB memory and disk, cpu_weight 10 and a 2m retention", func() {
		cfg, err := LoadConfig(nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.TaskDefaults).To(Equal(TaskDefaultsConfig{MemoryMB: 1024, DiskMB: 1024, CPUWeight: 10}))
		Expect(cfg.TaskRetention.Duration).To(Equal(2 * time.Minute))
	})

	It("reads task_defaults and task_retention, and --task-retention wins", func() {
		path := writeConfig("task_defaults:\n  memory_mb: 256\n  disk_mb: 512\n  cpu_weight: 5\ntask_retention: 1h\n")
		cfg, err := LoadConfig([]string{"--config", path, "--task-retention", "0s"})
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.TaskDefaults).To(Equal(TaskDefaultsConfig{MemoryMB: 256, DiskMB: 512, CPUWeight: 5}))
		Expect(cfg.TaskRetention.Duration).To(BeZero())
	})

	DescribeTable("rejects mistakes",
		func(file string, args []string, message string) {
			if file != "" {
				args = append(args, "--config", writeConfig(file))
			}
			_, err := LoadConfig(args)
			Expect(err).To(MatchError(ContainSubstring(message)))
		},
		Entry("no memory", "task_defaults:\n  memory_mb: 0\n", nil, "task_defaults"),
		Entry("cpu_weight over 100", "task_defaults:\n  memory_mb: 1\n  cpu_weight: 101\n", nil, "task_defaults"),
		Entry("negative retention", "", []string{"--task-retention", "-1s"}, "task_retention"),
	)
})
