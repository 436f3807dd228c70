package handler

import (
	"context"
	"net/http"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"github.com/julienschmidt/httprouter"

	"github.com/opi-bridge/opi/models"
)

// StagingBifrost is what the handler needs of the staging bifrost.
//
//counterfeiter:generate -o ../fakes/staging_bifrost.go . StagingBifrost
type StagingBifrost interface {
	Stage(ctx context.Context, stagingGUID string, req models.StagingRequest) error
}

type stageHandler struct {
	bifrost      StagingBifrost
	logger       lager.Logger
	maxBody      int64
	writeTimeout time.Duration
}

// stage accepts a docker staging: 202 {} once it is recorded; the result goes to the request's
// completion_callback later. Errors use the task/stage body {"message":"..."}.
func (h *stageHandler) stage(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	guid := ps.ByName("staging_guid")
	logger := h.logger.Session("stage", lager.Data{"staging-guid": guid})

	var req models.StagingRequest
	if !decodeRequest(w, r, h.maxBody, logger, &req, writeMessageError) {
		return
	}
	err := boundedWrite(r, h.writeTimeout, func(ctx context.Context) error { return h.bifrost.Stage(ctx, guid, req) })
	if err != nil {
		status := statusFor(err)
		logFailure(logger, "stage", status, err)
		writeMessageError(w, status, err.Error())
		return
	}
	logger.Info("accepted", lager.Data{"app-guid": req.AppGUID})
	writeJSON(w, http.StatusAccepted, struct{}{})
}
