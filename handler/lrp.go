package handler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"github.com/julienschmidt/httprouter"

	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

type lrpHandler struct {
	bifrost      LRPBifrost
	logger       lager.Logger
	maxBody      int64
	writeTimeout time.Duration
	// versioned is bifrost when it has a list version (else nil), and body its encoded list.
	versioned VersionedLRPLister
	body      listBody
}

// write runs a write's backend call within the write timeout. An error after the deadline
// passed is the orchestrator being unavailable, whatever the call made of it (client-go's rate
// limiter, for one, reports it in its own words).
func (h *lrpHandler) write(r *http.Request, call func(ctx context.Context) error) error {
	return boundedWrite(r, h.writeTimeout, call)
}

// boundedWrite runs a write's backend call within timeout; see lrpHandler.write.
func boundedWrite(r *http.Request, timeout time.Duration, call func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	err := call(ctx)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.Is(err, opi.ErrUnavailable) {
		err = fmt.Errorf("%w: no answer within %s: %w", opi.ErrUnavailable, timeout, err)
	}
	return err
}

func idFrom(ps httprouter.Params) opi.LRPIdentifier {
	return opi.LRPIdentifier{GUID: ps.ByName("guid"), Version: ps.ByName("version")}
}

// fail logs err and writes the contract's error body with the status its kind deserves.
func fail(w http.ResponseWriter, logger lager.Logger, action string, err error) {
	status := statusFor(err)
	logFailure(logger, action, status, err)
	writeError(w, status, messageFor(status, err))
}

// decodeLRPBody decodes a desire or update body into req and checks that the guid-version it
// names (bodyProcessGUID, read after decoding) is the path's process guid. On a problem it
// answers the request and returns false.
func (h *lrpHandler) decodeLRPBody(w http.ResponseWriter, r *http.Request, logger lager.Logger, processGUID string, req any, bodyProcessGUID func() string) bool {
	if !decodeRequest(w, r, h.maxBody, logger, req, writeError) {
		return false
	}
	if body := bodyProcessGUID(); body != processGUID {
		logger.Info("bad-request", lager.Data{"reason": "path does not match body"})
		writeError(w, http.StatusBadRequest, "process guid in path "+strconv.Quote(processGUID)+" does not match guid-version in body "+strconv.Quote(body))
		return false
	}
	return true
}

func (h *lrpHandler) desire(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	processGUID := ps.ByName("guid")
	logger := h.logger.Session("desire-lrp", lager.Data{"process-guid": processGUID})

	var req models.DesireLRPRequest
	if !h.decodeLRPBody(w, r, logger, processGUID, &req, func() string { return req.GUID + "-" + req.Version }) {
		return
	}
	if err := h.write(r, func(ctx context.Context) error { return h.bifrost.Desire(ctx, req) }); err != nil {
		fail(w, logger, "desire", err)
		return
	}
	logger.Info("desired", lager.Data{"instances": req.Instances})
	writeJSON(w, http.StatusAccepted, struct{}{})
}

func (h *lrpHandler) list(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	logger := h.logger.Session("list-lrps")
	if h.versioned != nil {
		version, ok, err := h.versioned.ListVersion(r.Context())
		if err != nil {
			fail(w, logger, "list", err)
			return
		}
		if ok {
			body, err := h.body.get(r.Context(), version, h.encodeList)
			if err != nil {
				fail(w, logger, "list", err)
				return
			}
			writeBody(w, body)
			return
		}
	}
	infos, err := h.bifrost.List(r.Context())
	if err != nil {
		fail(w, logger, "list", err)
		return
	}
	writeList(w, infos)
}

// encodeList is GET /apps's body of the list as it is now, and its version.
func (h *lrpHandler) encodeList(ctx context.Context, size int) ([]byte, uint64, error) {
	infos, version, err := h.versioned.ListVersioned(ctx)
	if err != nil {
		return nil, 0, err
	}
	buf := bufferFor(size)
	if err := encodeList(buf, infos); err != nil {
		return nil, 0, fmt.Errorf("encode list: %w", err)
	}
	return buf.Bytes(), version, nil
}

func (h *lrpHandler) get(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id := idFrom(ps)
	logger := h.logger.Session("get-lrp", lager.Data{"process-guid": id.ProcessGUID()})
	lrp, err := h.bifrost.Get(r.Context(), id)
	if err != nil {
		fail(w, logger, "get", err)
		return
	}
	writeJSON(w, http.StatusOK, models.DesiredLRPResponse{DesiredLRP: *lrp})
}

func (h *lrpHandler) update(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	processGUID := ps.ByName("guid")
	logger := h.logger.Session("update-lrp", lager.Data{"process-guid": processGUID})

	var req models.UpdateDesiredLRPRequest
	if !h.decodeLRPBody(w, r, logger, processGUID, &req, func() string { return req.GUID + "-" + req.Version }) {
		return
	}
	if err := h.write(r, func(ctx context.Context) error { return h.bifrost.Update(ctx, req) }); err != nil {
		fail(w, logger, "update", err)
		return
	}
	logger.Info("updated")
	writeJSON(w, http.StatusOK, struct{}{})
}

func (h *lrpHandler) stop(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id := idFrom(ps)
	logger := h.logger.Session("stop-lrp", lager.Data{"process-guid": id.ProcessGUID()})
	if err := h.write(r, func(ctx context.Context) error { return h.bifrost.Stop(ctx, id) }); err != nil {
		fail(w, logger, "stop", err)
		return
	}
	logger.Info("stopped")
	writeJSON(w, http.StatusOK, struct{}{})
}

func (h *lrpHandler) stopInstance(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id := idFrom(ps)
	logger := h.logger.Session("stop-instance", lager.Data{"process-guid": id.ProcessGUID(), "index": ps.ByName("index")})
	index, err := strconv.ParseInt(ps.ByName("index"), 10, 32)
	if err != nil || index < 0 {
		logger.Info("bad-request", lager.Data{"reason": "index is not a non-negative integer"})
		writeError(w, http.StatusBadRequest, "instance index "+strconv.Quote(ps.ByName("index"))+" is not a non-negative integer")
		return
	}
	if err := h.write(r, func(ctx context.Context) error { return h.bifrost.StopInstance(ctx, id, int32(index)) }); err != nil {
		fail(w, logger, "stop-instance", err)
		return
	}
	logger.Info("stopped")
	writeJSON(w, http.StatusOK, struct{}{})
}

func (h *lrpHandler) instances(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	id := idFrom(ps)
	logger := h.logger.Session("get-instances", lager.Data{"process-guid": id.ProcessGUID()})
	instances, err := h.bifrost.Instances(r.Context(), id)
	if err != nil {
		status := statusFor(err)
		message := err.Error()
		if status == http.StatusNotFound {
			message = msgInstancesNotFound
		}
		if status >= http.StatusInternalServerError {
			logger.Error("get-instances-failed", err)
		}
		writeJSON(w, status, models.InstancesResponse{ProcessGUID: id.ProcessGUID(), Instances: []models.Instance{}, Error: message})
		return
	}
	if instances == nil {
		instances = []models.Instance{}
	}
	writeJSON(w, http.StatusOK, models.InstancesResponse{ProcessGUID: id.ProcessGUID(), Instances: instances})
}
