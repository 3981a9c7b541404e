import Foundation

/// The origins the sign-in page compares a return URL with (``SignInUsers/allowedRedirects``):
/// `scheme://host[:port]` with the scheme and host in lower case and the scheme's default port
/// left out, so `https://Notes.Example.com:443/done` has the origin `https://notes.example.com`.
enum RedirectOrigin {
    /// The origin of an absolute `http` or `https` URL, or nil: another scheme (`javascript:`), no
    /// host, or a user or password in it.
    static func of(_ url: String) -> String? {
        guard let components = URLComponents(string: url) else { return nil }
        return origin(of: components)
    }

    /// An entry of ``SignInUsers/allowedRedirects`` as an origin, or nil when it is not one: it may
    /// end with `/`, but has no other path, no query and no fragment.
    static func allowed(_ entry: String) -> String? {
        guard let components = URLComponents(string: entry), components.path.isEmpty || components.path == "/",
            components.query == nil, components.fragment == nil
        else { return nil }
        return origin(of: components)
    }

    /// `url` with `name=value` added to its query (before its fragment); nil when it is not a URL.
    static func adding(_ name: String, _ value: String, to url: String) -> String? {
        guard var components = URLComponents(string: url) else { return nil }
        let item = URLQueryItem(name: name, value: ConsoleFormat.percentEncoded(value))
        components.percentEncodedQueryItems = (components.percentEncodedQueryItems ?? []) + [item]
        return components.string
    }

    private static func origin(of components: URLComponents) -> String? {
        guard let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = components.host?.lowercased(), !host.isEmpty, components.user == nil, components.password == nil
        else { return nil }
        let defaultPort = scheme == "https" ? 443 : 80
        let port = components.port.flatMap { $0 == defaultPort ? nil : $0 }
        let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return "\(scheme)://\(bracketed)\(port.map { ":\($0)" } ?? "")"
    }
}
