package v1

import "time"

// Secret is a secret's public view, never its value. Secrets are named values hutchd's
// egress proxy injects into requests (EgressInject, EgressPlaceholder); a sandbox never sees
// them. UsedBy are the IDs of the sandboxes whose egress policy references it.
type Secret struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	UsedBy    []string  `json:"usedBy"`
}

// SecretList is the reply of GET /v1/secrets.
type SecretList struct {
	Reply
	Secrets []Secret `json:"secrets"`
}

// PutSecretRequest is the body of PUT /v1/secrets/{name} (204, no body). Value is required
// (absent → 400 INVALID_SECRET). DELETE /v1/secrets/{name} (204) of a secret that a policy
// still references → 409 SECRET_IN_USE (context usedBy); unknown → 404 SECRET_NOT_FOUND.
type PutSecretRequest struct {
	Value *string `json:"value"`
}
