package handler_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"code.cloudfoundry.org/lager/v3/lagertest"

	"github.com/opi-bridge/opi/bifrost"
	"github.com/opi-bridge/opi/fakes"
	"github.com/opi-bridge/opi/handler"
	"github.com/opi-bridge/opi/models"
)

// FuzzDesireRequest: any body on the desire route gets 202, 400 or 413 with a JSON body, and the
// backend sees only requests that passed validation. It drives the real bifrost over a fake
// backend, so decoding and conversion are fuzzed together.
func FuzzDesireRequest(f *testing.F) {
	f.Add(processGUID, []byte(desireBody))
	f.Add(processGUID, []byte(`{"guid":`))
	f.Add(processGUID, []byte(``))
	f.Add("a-b", []byte(`{"guid":"a","version":"b","memory_mb":1,"lifecycle":{"docker_lifecycle":{"image":"x"}}}`))
	f.Add("a-b", []byte(`{"guid":"a","version":"b","instances":"1"}`))
	f.Add("a-b", []byte(`[1,2,3]`))
	f.Fuzz(func(t *testing.T, pathGUID string, body []byte) {
		if pathGUID == "" || bytes.ContainsAny([]byte(pathGUID), "/?#%") {
			return
		}
		backend := new(fakes.FakeLRPBackend)
		h := handler.New(handler.Config{
			LRP: &bifrost.LRP{Backend: backend}, Readiness: new(fakes.FakeReadinessChecker),
			Logger: lagertest.NewTestLogger("fuzz"), MaxBodyBytes: 1 << 16,
		})
		req, err := http.NewRequest(http.MethodPut, "/apps/"+pathGUID, bytes.NewReader(body))
		if err != nil {
			return
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)

		switch rec.Code {
		case http.StatusAccepted:
			if backend.DesireLRPCallCount() != 1 {
				t.Fatalf("202 without a desire")
			}
			_, lrp := backend.DesireLRPArgsForCall(0)
			if lrp.ProcessGUID() != pathGUID {
				t.Fatalf("desired %q for path %q", lrp.ProcessGUID(), pathGUID)
			}
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusNotFound, http.StatusMethodNotAllowed:
			if backend.DesireLRPCallCount() != 0 {
				t.Fatalf("rejected with %d but desired anyway", rec.Code)
			}
			var e models.ErrorResponse
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Message == "" {
				t.Fatalf("status %d without an error message: %q", rec.Code, rec.Body.String())
			}
		default:
			t.Fatalf("unexpected status %d: %s", rec.Code, rec.Body.String())
		}
	})
}
