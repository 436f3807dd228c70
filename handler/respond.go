package handler

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"code.cloudfoundry.org/lager/v3"

	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

// Diego's texts, which CC recognises in error messages.
const (
	msgNotFound = "the requested resource could not be found"
	// msgInstancesNotFound must hold the words "not found": CC accepts an instances error for a
	// stopped process only then.
	msgInstancesNotFound = "failed to get instances for app: not found"
)

// statusFor maps the backend's and bifrost's sentinel errors to a status code. It is the one
// place where that happens.
func statusFor(err error) int {
	switch {
	case errors.Is(err, opi.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, opi.ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, opi.ErrUnavailable):
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// messageFor is the error message a client sees: Diego's text for not-found, else the error.
func messageFor(status int, err error) string {
	if status == http.StatusNotFound {
		return msgNotFound
	}
	return err.Error()
}

func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}

// writeList streams GET /apps's body item by item through a small buffer, instead of encoding
// the whole list first: at thousands of apps the encoded list is megabytes, which concurrent
// calls would each hold (and grow by doubling) at once. It serves an LRPBifrost without a list
// version; with one, the body is encoded once per version (listBody).
func writeList(w http.ResponseWriter, infos []models.DesiredLRPSchedulingInfo) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	if err := encodeList(bw, infos); err != nil {
		return // the client sees a truncated body; these structs always encode
	}
	_ = bw.Flush()
}

// listWriter is where encodeList writes: a bufio.Writer or a bytes.Buffer.
type listWriter interface {
	io.Writer
	io.ByteWriter
	io.StringWriter
}

// encodeList writes GET /apps's body: the bytes of models.DesiredLRPSchedulingInfosResponse,
// with a newline after each item.
func encodeList(w listWriter, infos []models.DesiredLRPSchedulingInfo) error {
	enc := json.NewEncoder(w)
	if _, err := w.WriteString(`{"` + models.SchedulingInfosKey + `":[`); err != nil {
		return err
	}
	for i := range infos {
		if i > 0 {
			if err := w.WriteByte(','); err != nil {
				return err
			}
		}
		if err := enc.Encode(&infos[i]); err != nil {
			return err
		}
	}
	_, err := w.WriteString("]}\n")
	return err
}

func writeError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, errorBody(message))
}

// logFailure logs err, which failed action and is answered with status: as an error when
// status is a server error, else as a rejection of the request.
func logFailure(logger lager.Logger, action string, status int, err error) {
	if status >= http.StatusInternalServerError {
		logger.Error(action+"-failed", err)
	} else {
		logger.Info(action+"-rejected", lager.Data{"status": status, "reason": err.Error()})
	}
}

// decodeRequest decodes r's body into into (see decodeBody); on a problem it logs it, answers
// it by writeErr (the route family's error body) and returns false.
func decodeRequest(w http.ResponseWriter, r *http.Request, limit int64, logger lager.Logger, into any, writeErr func(http.ResponseWriter, int, string)) bool {
	if rerr := decodeBody(w, r, limit, into); rerr != nil {
		logger.Info("bad-request", lager.Data{"status": rerr.status, "reason": rerr.message})
		writeErr(w, rerr.status, rerr.message)
		return false
	}
	return true
}

// requestError is a problem with the request itself, with the status it deserves.
type requestError struct {
	status  int
	message string
}

func (e *requestError) Error() string { return e.message }

// decodeBody reads a JSON body whatever its Content-Type (CC sends none that says JSON), within
// the size limit.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, into any) *requestError {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return &requestError{http.StatusRequestEntityTooLarge, fmt.Sprintf("request body is larger than %d bytes", limit)}
		}
		return &requestError{http.StatusBadRequest, "cannot read request body: " + err.Error()}
	}
	if len(body) == 0 {
		return &requestError{http.StatusBadRequest, "request body is empty"}
	}
	if err := json.Unmarshal(body, into); err != nil {
		return &requestError{http.StatusBadRequest, "invalid request body: " + describeJSONError(err)}
	}
	return nil
}

// describeJSONError names the field and the problem in terms a client understands.
func describeJSONError(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		if field == "" {
			field = "body"
		}
		return fmt.Sprintf("%s must be %s, got %s", field, jsonTypeName(typeErr.Type.Kind().String()), typeErr.Value)
	}
	var syntaxErr *json.SyntaxError
	if errors.As(err, &syntaxErr) {
		return fmt.Sprintf("malformed JSON at byte %d: %s", syntaxErr.Offset, syntaxErr.Error())
	}
	return err.Error()
}

func jsonTypeName(kind string) string {
	switch kind {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "a list"
	case "map", "struct":
		return "an object"
	case "ptr":
		return "a value of another type"
	}
	return "of another type"
}
