package sqlitestore

// schemaKeyRoles gives API keys a role (docs/access.md). Keys made before
// are admin keys, which is what they could do then.
const schemaKeyRoles = `
ALTER TABLE api_keys ADD COLUMN role TEXT NOT NULL DEFAULT 'admin';
`
