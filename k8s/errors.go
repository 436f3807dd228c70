package k8s

import (
	"github.com/opi-bridge/opi/k8s/kube"
)

// apiError wraps an error of a Kubernetes call with what was being done and, where it has one,
// the opi sentinel a caller tells it by: NotFound → ErrNotFound; Invalid, BadRequest and
// too large → ErrInvalid (the API server did not accept our input); unreachable, timeouts,
// 503, 429 and deadlines → ErrUnavailable. The API error stays in the chain as well.
func apiError(err error, doing string) error {
	return kube.APIError(err, doing)
}
