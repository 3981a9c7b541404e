import Hummingbird

/// The scheme and host a client reached the server by, for the URLs the server hands out (upload
/// URLs are absolute, as Apple's are, so a client posts to them as they are).
///
/// Behind a proxy that sets `X-Forwarded-Proto` and `X-Forwarded-Host` (nginx:
/// `proxy_set_header X-Forwarded-Host $host;`), those; otherwise the request's `Host` over `http`
/// (`cloudstore serve` speaks plain HTTP; TLS ends at the proxy). The answer goes back to the
/// client that sent the headers, so a client that lies about them only misleads itself. A host
/// that is not a plain host name, address and port gives no origin, and the URL stays relative.
enum RequestOrigin {
    /// `scheme://host[:port]`, or nil.
    static func of(_ request: Request) -> String? {
        origin(
            scheme: request.headers[named: "X-Forwarded-Proto"],
            forwardedHost: request.headers[named: "X-Forwarded-Host"], host: request.head.authority)
    }

    /// The origin of the header values; each forwarded header may list several proxies, the first
    /// is the client's.
    static func origin(scheme: String?, forwardedHost: String?, host: String?) -> String? {
        func first(_ value: String?) -> String? {
            value?.split(separator: ",").first.map { $0.trimmingCharacters(in: .whitespaces) }
        }
        guard let host = first(forwardedHost) ?? host, isPlainHost(host) else { return nil }
        let scheme = first(scheme)?.lowercased() == "https" ? "https" : "http"
        return "\(scheme)://\(host)"
    }

    /// A host name or address with an optional port: letters, digits, `.`, `-`, `_`, `:` and the
    /// brackets of an IPv6 address, at most 255 characters.
    static func isPlainHost(_ host: String) -> Bool {
        !host.isEmpty && host.utf8.count <= 255
            && host.unicodeScalars.allSatisfy {
                $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || ".-_:[]".unicodeScalars.contains($0))
            }
    }
}
