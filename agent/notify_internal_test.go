package agent

import (
	"context"
	"os"
	"path/filepath"

	"code.cloudfoundry.org/lager/v3/lagertest"
	"github.com/fsnotify/fsnotify"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("notifier", func() {
	var (
		n    *notifier
		root string
	)

	BeforeEach(func() {
		root = GinkgoT().TempDir()
		n = newNotifier(lagertest.NewTestLogger("notify"), false)
		Expect(n.w).NotTo(BeNil())
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); n.run(ctx) }()
		DeferCleanup(func() { cancel(); <-done })
	})

	folder := func(name string) string {
		dir := filepath.Join(root, name)
		Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
		return dir
	}

	It("wakes the follower of a folder when a file in it is written, created or renamed, and no other", func() {
		a, b := folder("a"), folder("b")
		wakeA, wakeB := make(chan struct{}, 1), make(chan struct{}, 1)
		Expect(n.watch(a, wakeA)).To(BeTrue())
		Expect(n.watch(b, wakeB)).To(BeTrue())

		Expect(os.WriteFile(filepath.Join(a, "0.log"), []byte("line\n"), 0o644)).To(Succeed())
		Eventually(wakeA).Should(Receive())
		Expect(os.Rename(filepath.Join(a, "0.log"), filepath.Join(a, "0.log.20261202-100000"))).To(Succeed())
		Eventually(wakeA).Should(Receive())
		Consistently(wakeB).ShouldNot(Receive())
	})

	It("cannot watch a folder that does not exist yet (the follower polls), and stops watching one removed", func() {
		Expect(n.watch(filepath.Join(root, "missing"), make(chan struct{}, 1))).To(BeFalse())

		dir := folder("gone")
		wake := make(chan struct{}, 1)
		Expect(n.watch(dir, wake)).To(BeTrue())
		Expect(n.watching(dir)).To(BeTrue())
		Expect(os.RemoveAll(dir)).To(Succeed())
		Eventually(func() bool { return n.watching(dir) }).Should(BeFalse())
		Expect(wake).To(Receive())
	})

	It("wakes every follower when the kernel's event queue overflowed (events may be lost)", func() {
		wakeA, wakeB := make(chan struct{}, 1), make(chan struct{}, 1)
		Expect(n.watch(folder("a"), wakeA)).To(BeTrue())
		Expect(n.watch(folder("b"), wakeB)).To(BeTrue())
		n.w.Errors <- fsnotify.ErrEventOverflow
		Eventually(wakeA).Should(Receive())
		Eventually(wakeB).Should(Receive())
	})

	It("watches nothing when notification is off or unavailable", func() {
		off := newNotifier(lagertest.NewTestLogger("notify"), true)
		Expect(off.watch(folder("a"), make(chan struct{}, 1))).To(BeFalse())
		off.run(context.Background()) // returns at once
	})
})
