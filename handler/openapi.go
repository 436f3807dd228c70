package handler

import (
	_ "embed"
	"net/http"

	"github.com/julienschmidt/httprouter"
	"sigs.k8s.io/yaml"
)

// OpenAPIYAML is the API description (OpenAPI 3) of every route opi serves, as written.
//
//go:embed openapi.yaml
var OpenAPIYAML []byte

// openAPIJSON is OpenAPIYAML as JSON, converted once: the document is embedded, so a
// conversion error is a build mistake that the package's tests catch.
var openAPIJSON = func() []byte {
	b, err := yaml.YAMLToJSON(OpenAPIYAML)
	if err != nil {
		panic("handler/openapi.yaml: " + err.Error())
	}
	return b
}()

func serveOpenAPI(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIJSON)
}
