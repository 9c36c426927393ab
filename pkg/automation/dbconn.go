package automation

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/mail"
	"net/url"
	"slices"
	"strings"
)

// Connection types of SQL and EMAIL steps (docs/flows.md, "SQL", "EMAIL").
// Their values are kept like an API key: sealed locally, Secrets Manager on
// AWS, never returned; the password is masked in run records.
const (
	ConnectionPostgres ConnectionType = "POSTGRES" // {"url"} or {"host", "port", "database", "username", "password", "tls"}
	ConnectionMySQL    ConnectionType = "MYSQL"    // the same shape
	ConnectionSMTP     ConnectionType = "SMTP"     // {"host", "port", "username", "password", "from", "tls"}
)

func init() {
	ConnectionTypes = append(ConnectionTypes, ConnectionPostgres, ConnectionMySQL, ConnectionSMTP)
}

// DatabaseConfig is a POSTGRES or MYSQL connection's value: a URL, or its
// parts. TLS is "require", "verify-full" or "disable" (POSTGRES's sslmode
// words; MYSQL maps them to its tls parameter); default "require"...
// except for a URL, which carries its own.
type DatabaseConfig struct {
	URL      Secret `json:"url,omitempty"`
	Host     string `json:"host,omitempty"`
	Port     int    `json:"port,omitempty"`
	Database string `json:"database,omitempty"`
	Username string `json:"username,omitempty"`
	Password Secret `json:"password,omitempty"`
	TLS      string `json:"tls,omitempty"`
}

// SMTPConfig is an SMTP connection's value. TLS is "starttls" (default,
// port 587), "tls" (implicit, port 465) or "none" (port 25; for a relay on
// a private network).
type SMTPConfig struct {
	Host     string `json:"host"`
	Port     int    `json:"port,omitempty"`
	Username string `json:"username,omitempty"`
	Password Secret `json:"password,omitempty"`
	From     string `json:"from"`
	TLS      string `json:"tls,omitempty"`
}

// storedDatabase and storedSMTP are the values as Secrets keeps them:
// plain strings, since a Secret encodes as its mask.
type storedDatabase struct {
	Type     ConnectionType `json:"type,omitempty"`
	URL      string         `json:"url,omitempty"`
	Host     string         `json:"host,omitempty"`
	Port     int            `json:"port,omitempty"`
	Database string         `json:"database,omitempty"`
	Username string         `json:"username,omitempty"`
	Password string         `json:"password,omitempty"`
	TLS      string         `json:"tls,omitempty"`
}

type storedSMTP struct {
	Host     string `json:"host"`
	Port     int    `json:"port,omitempty"`
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	From     string `json:"from"`
	TLS      string `json:"tls,omitempty"`
}

// DatabaseTLS and SMTPTLS are the allowed tls values.
var (
	DatabaseTLS = []string{"require", "verify-full", "disable"}
	SMTPTLS     = []string{"starttls", "tls", "none"}
)

// decodeDatabase checks a POSTGRES or MYSQL value; messages name the
// field, never a value.
func decodeDatabase(typ ConnectionType, raw json.RawMessage) ([]byte, error) {
	shape := `{"url": string} or {"host", "port", "database", "username", "password", "tls"}`
	var v struct {
		URL      *string `json:"url"`
		Host     string  `json:"host"`
		Port     int     `json:"port"`
		Database string  `json:"database"`
		Username string  `json:"username"`
		Password string  `json:"password"`
		TLS      string  `json:"tls"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if len(bytes.TrimSpace(raw)) == 0 || dec.Decode(&v) != nil {
		return nil, Invalid("value must be an object %s for %s", shape, typ)
	}
	if v.URL != nil {
		if v.Host != "" || v.Database != "" || v.Username != "" || v.Password != "" || v.Port != 0 {
			return nil, Invalid("value: give either url or the parts (host, port, …), not both")
		}
		u, err := url.Parse(*v.URL)
		want := map[ConnectionType][]string{ConnectionPostgres: {"postgres", "postgresql"}, ConnectionMySQL: {"mysql"}}[typ]
		if err != nil || !slices.Contains(want, u.Scheme) || u.Hostname() == "" {
			return nil, Invalid("value.url: want %s://user:password@host:port/database", want[0])
		}
		if err := CheckSendHost(u.Hostname()); err != nil {
			return nil, Invalid("value.url: %s", err.(*Error).Message)
		}
		return json.Marshal(storedDatabase{URL: *v.URL, TLS: v.TLS})
	}
	if err := CheckSendHost(v.Host); err != nil {
		return nil, Invalid("value.host: %s", err.(*Error).Message)
	}
	if v.Port < 0 || v.Port > 65535 {
		return nil, Invalid("value.port %d: use 1 to 65535 (0 takes the default)", v.Port)
	}
	if strings.TrimSpace(v.Username) == "" {
		return nil, Invalid("value.username is required")
	}
	if hasControl(v.Username) || hasControl(v.Password) || hasControl(v.Database) {
		return nil, Invalid("value.username, value.password and value.database must not contain control characters")
	}
	if v.TLS != "" && !slices.Contains(DatabaseTLS, v.TLS) {
		return nil, Invalid("value.tls %q: allowed values are %s", ClipID(v.TLS), strings.Join(DatabaseTLS, ", "))
	}
	return json.Marshal(storedDatabase{Host: v.Host, Port: v.Port, Database: v.Database,
		Username: v.Username, Password: v.Password, TLS: v.TLS})
}

// decodeSMTP checks an SMTP value.
func decodeSMTP(raw json.RawMessage) ([]byte, error) {
	var v struct {
		Host     string `json:"host"`
		Port     int    `json:"port"`
		Username string `json:"username"`
		Password string `json:"password"`
		From     string `json:"from"`
		TLS      string `json:"tls"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if len(bytes.TrimSpace(raw)) == 0 || dec.Decode(&v) != nil {
		return nil, Invalid(`value must be an object {"host", "port", "username", "password", "from", "tls": "starttls" | "tls" | "none"} for SMTP`)
	}
	if err := CheckSendHost(v.Host); err != nil {
		return nil, Invalid("value.host: %s", err.(*Error).Message)
	}
	if v.Port < 0 || v.Port > 65535 {
		return nil, Invalid("value.port %d: use 1 to 65535 (0 takes the default of tls)", v.Port)
	}
	if err := CheckMailAddress(v.From); err != nil {
		return nil, Invalid("value.from: %s", err.Error())
	}
	if hasControl(v.Username) || hasControl(v.Password) {
		return nil, Invalid("value.username and value.password must not contain control characters")
	}
	if v.TLS == "" {
		v.TLS = "starttls"
	}
	if !slices.Contains(SMTPTLS, v.TLS) {
		return nil, Invalid("value.tls %q: allowed values are %s", ClipID(v.TLS), strings.Join(SMTPTLS, ", "))
	}
	return json.Marshal(storedSMTP{Host: v.Host, Port: v.Port, Username: v.Username,
		Password: v.Password, From: v.From, TLS: v.TLS})
}

// CheckMailAddress says why s cannot be put in a mail header, nil if it
// can: one address (with an optional display name), no line break.
func CheckMailAddress(s string) error {
	if strings.ContainsAny(s, "\r\n") {
		return fmt.Errorf("an address contains a line break (CR or LF)")
	}
	if hasControl(s) {
		return fmt.Errorf("an address contains a control character")
	}
	if _, err := mail.ParseAddress(s); err != nil {
		return fmt.Errorf("%q is not an email address", ClipID(s))
	}
	return nil
}

// storedConfig decodes a POSTGRES, MYSQL or SMTP credential as stored.
func storedConfig(typ ConnectionType, raw []byte) (ConnectionValue, error) {
	var cv ConnectionValue
	switch typ {
	case ConnectionPostgres, ConnectionMySQL:
		var st storedDatabase
		if err := json.Unmarshal(raw, &st); err != nil {
			return cv, err
		}
		d := DatabaseConfig{URL: Secret(st.URL), Host: st.Host, Port: st.Port, Database: st.Database,
			Username: st.Username, Password: Secret(st.Password), TLS: st.TLS}
		cv.Database = &d
		for _, s := range []Secret{d.Password, d.URL} {
			if s != "" {
				cv.Masks = append(cv.Masks, s)
			}
		}
		if u, err := url.Parse(d.URL.Reveal()); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok && p != "" {
				cv.Masks = append(cv.Masks, Secret(p))
			}
		}
	case ConnectionSMTP:
		var st storedSMTP
		if err := json.Unmarshal(raw, &st); err != nil {
			return cv, err
		}
		m := SMTPConfig{Host: st.Host, Port: st.Port, Username: st.Username, Password: Secret(st.Password),
			From: st.From, TLS: st.TLS}
		cv.SMTP = &m
		if m.Password != "" {
			cv.Masks = append(cv.Masks, m.Password)
		}
	}
	return cv, nil
}

// connectionKind checks that the connection a SQL or EMAIL step names, if
// the project has one of that name, is of a type the step can use. A name
// the project lacks is the run's error (a portable flow may be saved
// before its connections exist).
func (s *flowValidator) connectionKind(ctx context.Context, f *Flow, st *Step, at string, types ...ConnectionType) error {
	return s.namedConnectionKind(ctx, f, st.Connection, at+".connection", "a "+string(st.Type)+" step", types...)
}

// namedConnectionKind is connectionKind for the connection name found at
// field, used by what (an MCP tool of an AI step names its own).
func (s *flowValidator) namedConnectionKind(ctx context.Context, f *Flow, name, field, what string, types ...ConnectionType) error {
	q := ListQuery{Limit: MaxPageSize}
	for {
		page, err := s.store.ListConnections(ctx, f.Project, q)
		if err != nil {
			return wrap("check connection", err)
		}
		for _, c := range page.Items {
			if c.Name == name && !slices.Contains(types, c.Type) {
				return Invalid("%s %q is a %s connection; %s needs %s", field, ClipID(name), c.Type, what, join(types))
			}
		}
		if page.Next == "" {
			return nil
		}
		q.After = page.Next
	}
}
