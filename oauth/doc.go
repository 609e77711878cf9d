// Package oauth makes Nexus an OAuth 2.1 client of the remote MCP servers it
// connects to, as the MCP authorization specification (2025-11-25 and 2026-07-28)
// describes.
//
// The pieces, each with one job:
//   - [ParseChallenges] reads a WWW-Authenticate header: the resource metadata URL
//     and the scope a 401 or a 403 insufficient_scope asks for.
//   - [DiscoverResource] and [DiscoverServer] find the protected resource metadata
//     (RFC 9728) and the authorization server's metadata (RFC 8414, OpenID
//     discovery), checking the resource it names and the issuer it declares.
//   - [Register] picks the client: pre-registered credentials from config, a
//     Client ID Metadata Document URL, or Dynamic Client Registration (RFC 7591).
//   - [Authorization] is one authorization code grant with PKCE (S256), the
//     resource indicator (RFC 8707) and the iss check of RFC 9207.
//   - [Vault] keeps tokens and client credentials in a secrets.Store, keyed by the
//     issuer, so a token is never sent to, or refreshed at, another server.
//   - [Session] is one server's authorization at run time: it finds and refreshes
//     the token, and [Transport] puts it on every request, refreshing on a 401 and
//     reporting a [LoginError] when a person must log in again.
//
// Nothing here writes a token to a log or an error: errors name servers, issuers and
// OAuth error codes, never credentials; every credential read or obtained is
// registered with the caller's redactor through Vault.Register.
package oauth
