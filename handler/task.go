package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"code.cloudfoundry.org/lager/v3"
	"github.com/julienschmidt/httprouter"

	"github.com/opi-bridge/opi/models"
)

// TaskBifrost is what the handler needs of the task bifrost.
//
//counterfeiter:generate -o ../fakes/task_bifrost.go . TaskBifrost
type TaskBifrost interface {
	Desire(ctx context.Context, guid string, req models.TaskRequest) error
	Get(ctx context.Context, guid string) (*models.TaskResponse, error)
	List(ctx context.Context) ([]models.TaskResponse, error)
	Cancel(ctx context.Context, guid string) error
}

// taskHandler serves the task routes. Their error body is {"message":"..."}, not the LRP
// routes' {"error":{"message"}}.
type taskHandler struct {
	bifrost TaskBifrost
	logger  lager.Logger
	maxBody int64
	// writeTimeout bounds each write, as on the LRP routes.
	writeTimeout time.Duration
	// versioned is bifrost when it has a list version (else nil), and body its encoded list.
	versioned VersionedTaskLister
	body      listBody
}

// failTask logs err and writes the task routes' error body with the status its kind deserves.
func failTask(w http.ResponseWriter, logger lager.Logger, action string, err error) {
	status := statusFor(err)
	logFailure(logger, action, status, err)
	writeMessageError(w, status, messageFor(status, err))
}

func (h *taskHandler) desire(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	guid := ps.ByName("task_guid")
	logger := h.logger.Session("desire-task", lager.Data{"task-guid": guid})
	var req models.TaskRequest
	if !decodeRequest(w, r, h.maxBody, logger, &req, writeMessageError) {
		return
	}
	if err := boundedWrite(r, h.writeTimeout, func(ctx context.Context) error { return h.bifrost.Desire(ctx, guid, req) }); err != nil {
		failTask(w, logger, "desire", err)
		return
	}
	logger.Info("desired")
	writeJSON(w, http.StatusAccepted, struct{}{})
}

func (h *taskHandler) get(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	guid := ps.ByName("task_guid")
	logger := h.logger.Session("get-task", lager.Data{"task-guid": guid})
	task, err := h.bifrost.Get(r.Context(), guid)
	if err != nil {
		failTask(w, logger, "get", err)
		return
	}
	writeJSON(w, http.StatusOK, task)
}

func (h *taskHandler) list(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	logger := h.logger.Session("list-tasks")
	if h.versioned != nil {
		version, ok, err := h.versioned.ListVersion(r.Context())
		if err != nil {
			failTask(w, logger, "list", err)
			return
		}
		if ok {
			body, err := h.body.get(r.Context(), version, h.encodeList)
			if err != nil {
				failTask(w, logger, "list", err)
				return
			}
			writeBody(w, body)
			return
		}
	}
	tasks, err := h.bifrost.List(r.Context())
	if err != nil {
		failTask(w, logger, "list", err)
		return
	}
	if tasks == nil {
		tasks = []models.TaskResponse{}
	}
	writeJSON(w, http.StatusOK, tasks)
}

// encodeList is GET /tasks's body of the list as it is now (the bytes writeJSON writes), and
// its version.
func (h *taskHandler) encodeList(ctx context.Context, size int) ([]byte, uint64, error) {
	tasks, version, err := h.versioned.ListVersioned(ctx)
	if err != nil {
		return nil, 0, err
	}
	if tasks == nil {
		tasks = []models.TaskResponse{}
	}
	buf := bufferFor(size)
	if err := json.NewEncoder(buf).Encode(tasks); err != nil {
		return nil, 0, fmt.Errorf("encode tasks: %w", err)
	}
	return buf.Bytes(), version, nil
}

// cancel answers 204 for a task it cancelled (or that had already ended or been cancelled) and
// 404 for an unknown one: CC's cancel takes both as success, never a 5xx for a repeat.
func (h *taskHandler) cancel(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	guid := ps.ByName("task_guid")
	logger := h.logger.Session("cancel-task", lager.Data{"task-guid": guid})
	if err := boundedWrite(r, h.writeTimeout, func(ctx context.Context) error { return h.bifrost.Cancel(ctx, guid) }); err != nil {
		failTask(w, logger, "cancel", err)
		return
	}
	logger.Info("cancelled")
	w.WriteHeader(http.StatusNoContent)
}
