import CloudStoreWire
import Foundation
import Hummingbird

/// A request-level error: a non-2xx response whose body is
/// `{"uuid", "serverErrorCode", "reason", "retryAfter"?, ...}`, with the HTTP status WireProtocol.md §4
/// gives the code.
struct APIError: Error, HTTPResponseError, CustomStringConvertible {
    var error: ServerError
    var status: HTTPResponse.Status
    var headers: HTTPFields

    init(
        _ code: ServerErrorCode, _ reason: String, zoneID: ZoneID? = nil, recordName: String? = nil,
        retryAfter: Double? = nil, status: HTTPResponse.Status? = nil
    ) {
        self.error = ServerError(code, reason: reason, retryAfter: retryAfter, recordName: recordName, zoneID: zoneID)
        self.status = status ?? HTTPResponse.Status(code: code.httpStatus)
        self.headers = [:]
    }

    var description: String { error.description }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        var error = self.error
        error.uuid = UUID().uuidString.lowercased()
        var response = try JSONResponse.make(error, status: status)
        response.headers.append(contentsOf: headers)
        return response
    }
}

/// The answer of an atomic records/modify where something failed: HTTP 400 with
/// `{"records": [...]}`, the culprit carrying its real error and every other operation `ATOMIC_ERROR`.
struct AtomicFailure: Error, HTTPResponseError {
    var results: [RecordResult]
    var status: HTTPResponse.Status { .badRequest }

    func response(from request: Request, context: some RequestContext) throws -> Response {
        try JSONResponse.make(RecordsResponse(records: results), status: .badRequest)
    }
}

/// JSON responses with the wire encoder.
enum JSONResponse {
    static let contentType = "application/json; charset=utf-8"

    static func make(
        _ value: some Encodable, status: HTTPResponse.Status = .ok, numbersAsStrings: Bool = false
    ) throws -> Response {
        let data = try WireCoding.makeEncoder(numbersAsStrings: numbersAsStrings).encode(value)
        return Response(
            status: status, headers: [.contentType: contentType],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }
}
