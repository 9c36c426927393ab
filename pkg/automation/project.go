package automation

import "time"

// Plan is a project's subscription level.
type Plan string

// Plans. IP allowlists need ENTERPRISE.
const (
	PlanFree       Plan = "FREE"
	PlanTeam       Plan = "TEAM"
	PlanEnterprise Plan = "ENTERPRISE"
)

// Plans lists the plans in the order error messages name them.
var Plans = []Plan{PlanFree, PlanTeam, PlanEnterprise}

// Project owns flows, connections and API keys. Every management request is
// scoped to the project of its API key.
type Project struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Plan    Plan      `json:"plan"`
	Created time.Time `json:"created"`
	// LimitOverrides are the operator's changes to the plan's limits, by
	// name in LimitNames; Unlimited lifts one. Limits() applies them.
	LimitOverrides map[string]int64 `json:"-"`
}

// APIKey grants access to one project. Only a hash of the key is stored; the
// key itself is shown once, at creation.
type APIKey struct {
	ID      string     `json:"id"`
	Project string     `json:"project"`
	Hash    string     `json:"-"`      // hex SHA-256 of the key
	Prefix  string     `json:"prefix"` // the first characters, to tell keys apart
	Created time.Time  `json:"created"`
	Revoked *time.Time `json:"revoked,omitempty"`
	// Role is what the key may do; stores report RoleAdmin for keys made
	// before roles existed.
	Role Role `json:"role"`
	// User is the person whose personal key this is (users.go), "" for a
	// project key the operator made. A personal key may do at most what
	// its user may, and is revoked when the user leaves the project.
	User string `json:"userId,omitempty"`
}
