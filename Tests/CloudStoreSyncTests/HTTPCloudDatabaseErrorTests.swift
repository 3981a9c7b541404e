import AsyncHTTPClient
import CloudStoreWire
import Foundation
import NIOHTTP1
import Testing

@testable import CloudStoreSync

@Suite struct HTTPCloudDatabaseErrorTests {
    func exchange(_ status: Int, _ body: String, headers: [(String, String)] = []) -> HTTPCloudDatabase.Exchange {
        HTTPCloudDatabase.Exchange(status: status, headers: HTTPHeaders(headers), body: Data(body.utf8), path: "/p")
    }

    @Test func errorBody_becomesAServerError() {
        let error = HTTPCloudDatabase.serverError(
            from: exchange(404, #"{"uuid": "u", "serverErrorCode": "ZONE_NOT_FOUND", "reason": "no zone Notes"}"#))
        #expect(error.code == .zoneNotFound)
        #expect(error.httpStatus == 404)
        #expect(!error.isTransient)
    }

    @Test func retryAfterHeader_fillsAMissingRetryAfter() {
        let error = HTTPCloudDatabase.serverError(
            from: exchange(429, #"{"serverErrorCode": "THROTTLED"}"#, headers: [("Retry-After", "12")]))
        #expect(error.retryAfter == 12)
        let bodyWins = HTTPCloudDatabase.serverError(
            from: exchange(429, #"{"serverErrorCode": "THROTTLED", "retryAfter": 3}"#, headers: [("Retry-After", "12")]))
        #expect(bodyWins.retryAfter == 3)
    }

    @Test func proxyPages_areNamedAfterTheirStatus() {
        #expect(HTTPCloudDatabase.serverError(from: exchange(503, "<html>busy</html>")).code == .tryAgainLater)
        #expect(HTTPCloudDatabase.serverError(from: exchange(502, "")).isTransient)
        #expect(HTTPCloudDatabase.serverError(from: exchange(401, "")).code == .authenticationFailed)
        #expect(HTTPCloudDatabase.serverError(from: exchange(418, "teapot")).kind == .invalidResponse)
    }

    @Test func transportErrors_mapToNetworkTimeoutAndCancelled() {
        func map(_ error: any Error) -> CloudError.Kind {
            HTTPCloudDatabase.cloudError(for: error, method: .GET, path: "/p", timeout: .seconds(1)).kind
        }
        #expect(map(HTTPClientError.deadlineExceeded) == .timeout)
        #expect(map(HTTPClientError.connectTimeout) == .timeout)
        #expect(map(HTTPClientError.remoteConnectionClosed) == .network)
        #expect(map(HTTPClientError.cancelled) == .cancelled)
        #expect(map(CancellationError()) == .cancelled)
    }

    @Test func queryValues_arePercentEncoded() {
        #expect(HTTPCloudDatabase.percentEncoded("a+b/c=") == "a%2Bb%2Fc%3D")
    }
}
