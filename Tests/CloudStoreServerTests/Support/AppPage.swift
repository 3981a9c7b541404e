import Foundation
import Hummingbird
import NIOCore

/// A web app's page on an origin of its own (`http://127.0.0.1:<port>`), apart from the server's:
/// what a person opens in a browser before they sign in through the server's sign-in window.
///
/// ```swift
/// try await AppPage.serving("<p>hello</p>") { origin in
///     let page = try await Chromium.load(origin + "/app", screenshot: file)
/// }
/// ```
enum AppPage {
    /// Serves `html` at `/app` on 127.0.0.1 while `body` runs; answers the page's origin to it.
    static func serving<Result>(_ html: String, _ body: (_ origin: String) async throws -> Result) async throws -> Result {
        let router = Router()
        router.get("app") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/html; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: html)))
        }
        let (ports, listening) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router, configuration: ApplicationConfiguration(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                listening.yield(channel.localAddress?.port ?? 0)
                listening.finish()
            })
        let server = Task { try await app.run() }
        defer { server.cancel() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next(), port > 0 else {
            throw CocoaError(.featureUnsupported, userInfo: [NSLocalizedDescriptionKey: "the app page's server did not start"])
        }
        let result = try await body("http://127.0.0.1:\(port)")
        server.cancel()
        _ = await server.result
        return result
    }
}
