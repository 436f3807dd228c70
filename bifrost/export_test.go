package bifrost

import (
	"github.com/opi-bridge/opi/models"
	"github.com/opi-bridge/opi/opi"
)

// ConvertDesire is what LRP.Desire hands the backend for req, or its refusal.
func ConvertDesire(req models.DesireLRPRequest, rules Rules) (*opi.LRP, error) {
	parts, err := validateDesire(req, rules)
	if err != nil {
		return nil, err
	}
	return convertDesire(req, parts), nil
}
