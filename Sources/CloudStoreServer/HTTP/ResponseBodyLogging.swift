import Hummingbird
import Logging
import NIOCore

extension Response {
    /// At `.trace` (level 4), logs the response body as it is written (up to 64 KiB of it), as the
    /// request gate logs request bodies; at other levels the response is left as it is.
    mutating func logBody(path: String, to logger: Logger) {
        guard logger.logLevel <= .trace else { return }
        let original = body
        body = ResponseBody(contentLength: original.contentLength) { writer in
            try await original.write(LoggingBodyWriter(base: writer, logger: logger, path: path))
        }
    }
}

/// Passes every buffer on and logs the first 64 KiB of what was written when the body ends.
private struct LoggingBodyWriter: ResponseBodyWriter {
    var base: any ResponseBodyWriter
    let logger: Logger
    let path: String
    var logged: [UInt8] = []

    mutating func write(_ buffer: ByteBuffer) async throws {
        if logged.count < 1 << 16 { logged += buffer.readableBytesView.prefix((1 << 16) - logged.count) }
        try await base.write(buffer)
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
        logger.trace("response body", metadata: ["path": "\(path)", "body": "\(String(decoding: logged, as: UTF8.self))"])
        try await base.finish(trailingHeaders)
    }
}
