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

    /// A request-level error from a per-item one, with the HTTP status of its code.
    init(_ error: ServerError) {
        self.error = error
        self.status = HTTPResponse.Status(code: error.serverErrorCode.httpStatus)
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
        let data = try WireCoding.encodedBytes(value, numbersAsStrings: numbersAsStrings)
        return Response(
            status: status, headers: [.contentType: contentType],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// A response whose records were written apart (``RecordWriter``): `envelope` is encoded with
    /// its record arrays empty, and the n-th `"records":[]` in it receives the n-th list of
    /// `records`, in order.
    static func make(
        _ envelope: some Encodable, records: [[[UInt8]]], status: HTTPResponse.Status = .ok,
        numbersAsStrings: Bool = false
    ) throws -> Response {
        let shell = try WireCoding.encodedBytes(envelope, numbersAsStrings: numbersAsStrings)
        let body = try splice(records, into: shell)
        var buffer = ByteBuffer()
        buffer.writeBytes(body)
        return Response(status: status, headers: [.contentType: contentType], body: ResponseBody(byteBuffer: buffer))
    }

    /// Puts each list of records into the n-th empty `"records":[]` of `shell`. The pattern cannot
    /// occur inside a JSON string (its quotes would be escaped there); a shell with another count
    /// of empty record arrays is a programming error.
    static func splice(_ records: [[[UInt8]]], into shell: [UInt8]) throws -> [UInt8] {
        let pattern = Array(#""records":[]"#.utf8)
        var body: [UInt8] = []
        body.reserveCapacity(shell.count + records.reduce(0) { $0 + $1.reduce($1.count) { $0 + $1.count } })
        var copied = 0
        var lists = records.makeIterator()
        var index = 0
        while index + pattern.count <= shell.count {
            guard shell[index] == pattern[0], shell[index..<index + pattern.count].elementsEqual(pattern) else {
                index += 1
                continue
            }
            guard let list = lists.next() else { throw SpliceMismatch() }
            let arrayStart = index + pattern.count - 1
            body.append(contentsOf: shell[copied..<arrayStart])
            for (position, record) in list.enumerated() {
                if position > 0 { body.append(UInt8(ascii: ",")) }
                body.append(contentsOf: record)
            }
            copied = arrayStart
            index += pattern.count
        }
        guard lists.next() == nil else { throw SpliceMismatch() }
        body.append(contentsOf: shell[copied...])
        return body
    }

    struct SpliceMismatch: Error, CustomStringConvertible {
        var description: String { "a response shell does not have one empty records array per list of records" }
    }
}
