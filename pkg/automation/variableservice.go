package automation

// VariableService holds a project's variables (variables.go): plain values
// in the store, secret ones in Secrets, loaded once per run.
type VariableService struct {
	*base
	store   VariableStore
	secrets secretStore
}
