package cc_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestCC(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "CC Client Suite")
}
