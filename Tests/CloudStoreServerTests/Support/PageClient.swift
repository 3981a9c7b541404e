import AsyncHTTPClient
import CloudStoreTesting
import Foundation
import NIOCore

/// A client of the server's HTML pages (the console, the sign-in page) that does not follow
/// redirects, so tests see the 303s and their cookies.
struct PageClient: Sendable {
    static let http: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    var baseURL: URL
    /// The cookie that ``get(_:token:cookie:)`` and ``post(_:form:cookie:)`` send a value of.
    var cookieName = "cloudstore_console"

    /// GETs a path with a bearer token (the operator's by default) or a sign-in cookie.
    func get(_ path: String, token: String? = TestServer.operatorToken, cookie: String? = nil) async throws -> Answer {
        var request = HTTPClientRequest(url: baseURL.absoluteString + path)
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let cookie { request.headers.add(name: "Cookie", value: "\(cookieName)=\(cookie)") }
        return try await send(request)
    }

    /// POSTs a form (`application/x-www-form-urlencoded`).
    func post(_ path: String, form: String, cookie: String? = nil) async throws -> Answer {
        var request = HTTPClientRequest(url: baseURL.absoluteString + path)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        if let cookie { request.headers.add(name: "Cookie", value: "\(cookieName)=\(cookie)") }
        request.body = .bytes(ByteBuffer(string: form))
        return try await send(request)
    }

    private func send(_ request: HTTPClientRequest) async throws -> Answer {
        let response = try await Self.http.execute(request, timeout: .seconds(60))
        let body = try await response.body.collect(upTo: 16 << 20)
        return Answer(status: Int(response.status.code), headers: response.headers, body: Data(buffer: body))
    }
}
