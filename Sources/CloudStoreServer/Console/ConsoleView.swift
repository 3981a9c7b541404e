import Foundation
import Hummingbird

/// What every console template renders: the layout's title, breadcrumbs and sign-out button, and
/// the page's own view in `page`.
struct ConsolePage<Content>: Sendable where Content: Sendable {
    var title: String
    var crumbs: [ConsoleCrumb]
    var signedIn: Bool
    var page: Content
}

/// A link above a page's title to the pages it lies under.
struct ConsoleCrumb: Sendable {
    var text: String
    var href: String
}

/// Renders console pages into HTML responses that no cache keeps and no other site frames.
enum ConsoleView {
    /// The headers of every console answer: HTML, never stored, no scripts, no framing, no referrer.
    static func headers(location: String? = nil) -> HTTPFields {
        var headers: HTTPFields = [
            .contentType: "text/html; charset=utf-8",
            .cacheControl: "no-store",
            .contentSecurityPolicy:
                "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
            .xContentTypeOptions: "nosniff",
            .init("Referrer-Policy")!: "no-referrer",
        ]
        if let location { headers[.location] = location }
        return headers
    }

    static func render<Content: Sendable>(
        _ template: String, status: HTTPResponse.Status = .ok, title: String,
        crumbs: [ConsoleCrumb] = [], signedIn: Bool, page: Content
    ) -> Response {
        let view = ConsolePage(title: title, crumbs: crumbs, signedIn: signedIn, page: page)
        guard let html = ConsoleTemplates.library.render(view, withTemplate: template) else {
            preconditionFailure("no console template \(template)")
        }
        return Response(status: status, headers: headers(), body: ResponseBody(byteBuffer: ByteBuffer(string: html)))
    }

    static func failure(status: HTTPResponse.Status, signedIn: Bool, message: String) -> Response {
        let title =
            switch status.code {
            case 404: "Not found"
            case 400: "Not a console address"
            case 429: "Too many sign-ins"
            default: "Something failed"
            }
        return render("failure", status: status, title: title, signedIn: signedIn, page: FailureView(message: message))
    }
}

struct FailureView: Sendable {
    var message: String
}

struct SignInView: Sendable {
    var next: String
    var message: String
    var hasMessage: Bool
}
