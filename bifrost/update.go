package bifrost

import (
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

// ConvertUpdate validates an update and turns it into an opi.LRPUpdate; only the fields the
// update names are checked and set.
func ConvertUpdate(req models.UpdateDesiredLRPRequest) (opi.LRPIdentifier, opi.LRPUpdate, error) {
	id := opi.LRPIdentifier{GUID: req.GUID, Version: req.Version}
	if err := ValidateIdentifier(id); err != nil {
		return id, opi.LRPUpdate{}, err
	}
	if req.Update == nil {
		return id, opi.LRPUpdate{}, invalid("update", "is required")
	}
	var out opi.LRPUpdate
	if n := req.Update.Instances; n != nil {
		if err := checkBounds(bound{field: "update.instances", value: int64(*n), highest: MaxInstances}); err != nil {
			return id, out, err
		}
		instances := int32(*n)
		out.Instances = &instances
	}
	if req.Update.Routes != nil {
		routes, err := parseRoutes("update.routes", req.Update.Routes)
		if err != nil {
			return id, out, err
		}
		out.Routes = &routes
	}
	out.Annotation = req.Update.Annotation
	if img := req.Update.Image; img != nil {
		if err := ValidateImage("update.image", *img); err != nil {
			return id, out, err
		}
		out.Image = img
	}
	return id, out, nil
}
