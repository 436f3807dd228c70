package main

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestOpiBench(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "opi-bench Suite")
}
