// Package oauth is the client side of OAuth2 for connections: the
// authorization URL (authorization code with PKCE S256 and state), the code
// exchange and the refresh, over golang.org/x/oauth2. It implements
// automation.OAuthClient and reports a provider's refusals as the domain's
// errors, which decide a connection's next state.
package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/oauth2"

	"flowservice/pkg/automation"
)

// Client is an automation.OAuthClient. Every call to a token endpoint goes
// through its http.Client: give it the engine's guarded transport so the
// SSRF rule applies to token endpoints as to HTTP steps.
type Client struct {
	http    *http.Client
	timeout time.Duration // TokenTimeout
}

// TokenTimeout bounds one token exchange or refresh as a whole: the
// OAuth2 library tries a token endpoint twice (credentials in a header,
// then in the form) when the first try fails, so a per-request timeout
// alone let a hanging endpoint keep the OAuth callback unanswered for a
// minute. The callback shows its error page within this time.
const TokenTimeout = 10 * time.Second

var _ automation.OAuthClient = (*Client)(nil)

// New returns a Client whose token requests use rt, each exchange or
// refresh within TokenTimeout.
func New(rt http.RoundTripper) *Client {
	return &Client{timeout: TokenTimeout, http: &http.Client{Transport: rt, Timeout: TokenTimeout,
		// A token endpoint that redirects is refused: the code and the
		// client secret are not sent on to another address.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func config(app automation.OAuthApp, secret, redirectURL string) *oauth2.Config {
	return &oauth2.Config{
		ClientID: app.ClientID, ClientSecret: secret, RedirectURL: redirectURL, Scopes: app.Scopes,
		Endpoint: oauth2.Endpoint{AuthURL: app.AuthorizeURL, TokenURL: app.TokenURL},
	}
}

// AuthCodeURL is the authorization URL: response_type=code, client_id,
// redirect_uri, scope, state, code_challenge and code_challenge_method=S256.
func (c *Client) AuthCodeURL(app automation.OAuthApp, redirectURL, state, verifier string) string {
	return config(app, "", redirectURL).AuthCodeURL(state, oauth2.S256ChallengeOption(verifier))
}

// Exchange trades the code for tokens, proving the verifier.
func (c *Client) Exchange(ctx context.Context, app automation.OAuthApp, secret, redirectURL, code, verifier string) (automation.OAuthToken, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	ctx = context.WithValue(ctx, oauth2.HTTPClient, c.http)
	t, err := config(app, secret, redirectURL).Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		return automation.OAuthToken{}, classify("exchange code", app.Name, err)
	}
	return token(t), nil
}

// Refresh trades a refresh token for a new access token.
func (c *Client) Refresh(ctx context.Context, app automation.OAuthApp, secret, refreshToken string) (automation.OAuthToken, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	ctx = context.WithValue(ctx, oauth2.HTTPClient, c.http)
	// An expired access token makes the source refresh at once.
	src := config(app, secret, "").TokenSource(ctx, &oauth2.Token{RefreshToken: refreshToken, Expiry: time.Unix(1, 0)})
	t, err := src.Token()
	if err != nil {
		return automation.OAuthToken{}, classify("refresh token", app.Name, err)
	}
	return token(t), nil
}

func token(t *oauth2.Token) automation.OAuthToken {
	return automation.OAuthToken{
		AccessToken: automation.Secret(t.AccessToken), RefreshToken: automation.Secret(t.RefreshToken),
		TokenType: t.Type(), Expiry: t.Expiry.UTC(),
	}
}

// classify maps a token endpoint's refusal to the domain's errors:
// invalid_grant is a revoked grant, 401/403 a rejected client, anything
// else (network, 5xx, a malformed answer) the provider failing. The
// provider's answer body is not kept: it may echo a token.
func classify(op, app string, err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		switch {
		case re.ErrorCode == "invalid_grant":
			return fmt.Errorf("oauth: %s for %s: %w", op, app, automation.ErrGrantRevoked)
		case status == http.StatusUnauthorized || status == http.StatusForbidden || re.ErrorCode == "invalid_client" || re.ErrorCode == "unauthorized_client":
			return fmt.Errorf("oauth: %s for %s: HTTP %d %s: %w", op, app, status, re.ErrorCode, automation.ErrClientRejected)
		}
		return fmt.Errorf("oauth: %s for %s: HTTP %d %s", op, app, status, re.ErrorCode)
	}
	return fmt.Errorf("oauth: %s for %s: %w", op, app, err)
}
