package automation

import "sync"

// ConnectionService holds the credentials flows call services with:
// connections and their states (connections.go, connection.go), OAuth2
// apps, authorization and refresh (oauth.go), and the secret values behind
// them, read through the secrets cache (secretcache.go). Executors read
// credentials through it (Credentials).
type ConnectionService struct {
	*base
	store      ConnectionStore
	secrets    secretStore
	oauthApps  OAuthAppStore // nil: no OAuth2 apps
	oauth      OAuthClient   // nil: OAUTH2 connections cannot refresh
	apps       AppCatalog    // nil: no app catalog (default hosts, OAuth2 endpoints)
	refreshing sync.Map      // connection ID -> *sync.Mutex: one refresh at a time per connection
}
