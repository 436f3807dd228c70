module github.com/opi-bridge/opi

go 1.26.0

require (
	code.cloudfoundry.org/lager/v3 v3.0.3 // indirect
	github.com/Masterminds/semver/v3 v3.4.0 // indirect
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/go-task/slim-sprig/v3 v3.0.0 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/google/pprof v0.0.0-20260402051712-545e8a4df936 // indirect
	github.com/julienschmidt/httprouter v1.3.0 // indirect
	github.com/maxbrunsfeld/counterfeiter/v6 v6.14.0 // indirect
	github.com/onsi/ginkgo/v2 v2.34.0 // indirect
	github.com/onsi/gomega v1.44.0 // indirect
	github.com/openzipkin/zipkin-go v0.4.2 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/mod v0.41.0 // indirect
	golang.org/x/net v0.59.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	golang.org/x/tools v0.50.0 // indirect
	k8s.io/api v0.37.2 // indirect
	k8s.io/apimachinery v0.37.2 // indirect
	k8s.io/client-go v0.37.2 // indirect
	sigs.k8s.io/yaml v1.6.0 // indirect
)

tool (
	github.com/maxbrunsfeld/counterfeiter/v6
	github.com/onsi/ginkgo/v2/ginkgo
)
