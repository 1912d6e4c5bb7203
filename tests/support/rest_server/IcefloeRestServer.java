/*
 * An Iceberg REST catalog server for tests: Apache Iceberg's own request handlers
 * (org.apache.iceberg.rest.CatalogHandlers) over a JdbcCatalog, served by the JDK's HTTP server.
 *
 * It lives in Iceberg's package because RESTObjectMapper (the JSON mapper with Iceberg's REST
 * serializers, as the Java client uses it) and CatalogHandlers.commit are package-private.
 *
 * Started by tests/support/rest_server/__init__.py with `--config <json file>`; see that file.
 *
 * Routes: the Iceberg REST OpenAPI spec's, under /v1/{prefix}/ (plus /v1/config and
 * /v1/oauth/tokens), all but the token endpoint behind OAuth2 bearer tokens. Test hooks, not
 * part of the spec and without authentication, under /__test/:
 *   GET  /__test/requests        the "METHOD path" of each request since the last reset
 *   POST /__test/reset           clears that log and every pending fault
 *   GET  /__test/faults          the faults still pending
 *   POST /__test/faults          {"commit_then": 503} | {"before_commit": 503} | {"delay_ms": N}
 *                                | {"any_request": 429} (the next request of any kind),
 *                                with "count" (default 1; -1 = until reset), "type", "message"
 *   POST /__test/settings        {"token_lifetime_s": N, "table_config": {k: v}} (table_config:
 *                                what load/create-table responses vend as their `config`)
 *   POST /__test/expire-tokens   every token issued so far stops being valid
 *   GET  /__test/answers         "METHOD path -> status" of each request since the last reset
 *
 * With the setting {"etags": true} (off again after a reset), loadTable answers as the REST
 * spec allows since Iceberg 1.8 and as Polaris and Gravitino do, which Iceberg's handlers up to
 * 1.10 do not: an ETag header (a hash of the metadata location), and 304 Not Modified without
 * a body when the request's If-None-Match holds the current one.
 */
package org.apache.iceberg.rest;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.HexFormat;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import org.apache.iceberg.CatalogUtil;
import org.apache.iceberg.catalog.Catalog;
import org.apache.iceberg.catalog.Namespace;
import org.apache.iceberg.catalog.SupportsNamespaces;
import org.apache.iceberg.catalog.TableIdentifier;
import org.apache.iceberg.catalog.ViewCatalog;
import org.apache.iceberg.exceptions.AlreadyExistsException;
import org.apache.iceberg.exceptions.BadRequestException;
import org.apache.iceberg.exceptions.CommitFailedException;
import org.apache.iceberg.exceptions.ForbiddenException;
import org.apache.iceberg.exceptions.NamespaceNotEmptyException;
import org.apache.iceberg.exceptions.NoSuchNamespaceException;
import org.apache.iceberg.exceptions.NoSuchTableException;
import org.apache.iceberg.exceptions.NoSuchViewException;
import org.apache.iceberg.exceptions.NotAuthorizedException;
import org.apache.iceberg.exceptions.ServiceUnavailableException;
import org.apache.iceberg.exceptions.UnprocessableEntityException;
import org.apache.iceberg.exceptions.ValidationException;
import org.apache.iceberg.rest.requests.CommitTransactionRequest;
import org.apache.iceberg.rest.requests.CreateNamespaceRequest;
import org.apache.iceberg.rest.requests.CreateTableRequest;
import org.apache.iceberg.rest.requests.CreateViewRequest;
import org.apache.iceberg.rest.requests.RegisterTableRequest;
import org.apache.iceberg.rest.requests.RenameTableRequest;
import org.apache.iceberg.rest.requests.ReportMetricsRequest;
import org.apache.iceberg.rest.requests.UpdateNamespacePropertiesRequest;
import org.apache.iceberg.rest.requests.UpdateTableRequest;
import org.apache.iceberg.rest.responses.ConfigResponse;
import org.apache.iceberg.rest.responses.ErrorResponse;
import org.apache.iceberg.rest.responses.LoadTableResponse;
import org.apache.iceberg.rest.responses.OAuthTokenResponse;
import org.apache.iceberg.shaded.com.fasterxml.jackson.core.JsonProcessingException;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.JsonNode;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.node.ObjectNode;

public class IcefloeRestServer {
  private static final PrintStream LOG = System.err;
  private static final String ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token";
  private static final String TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";

  /** As Iceberg's RESTCatalogAdapter maps them, walking up the exception's class hierarchy. */
  private static final Map<Class<?>, Integer> ERROR_CODES = new LinkedHashMap<>();

  static {
    ERROR_CODES.put(IllegalArgumentException.class, 400);
    ERROR_CODES.put(ValidationException.class, 400);
    ERROR_CODES.put(BadRequestException.class, 400);
    ERROR_CODES.put(JsonProcessingException.class, 400);
    ERROR_CODES.put(NotAuthorizedException.class, 401);
    ERROR_CODES.put(ForbiddenException.class, 403);
    ERROR_CODES.put(NoSuchNamespaceException.class, 404);
    ERROR_CODES.put(NoSuchTableException.class, 404);
    ERROR_CODES.put(NoSuchViewException.class, 404);
    ERROR_CODES.put(UnsupportedOperationException.class, 406);
    ERROR_CODES.put(AlreadyExistsException.class, 409);
    ERROR_CODES.put(CommitFailedException.class, 409);
    ERROR_CODES.put(NamespaceNotEmptyException.class, 409);
    ERROR_CODES.put(UnprocessableEntityException.class, 422);
    ERROR_CODES.put(ServiceUnavailableException.class, 503);
  }

  /** Error "type" of a status the fault injection answers with, unless the fault names one. */
  private static final Map<Integer, String> STATUS_TYPES =
      Map.of(
          400, "BadRequestException",
          401, "NotAuthorizedException",
          403, "ForbiddenException",
          404, "NotFoundException",
          409, "CommitFailedException",
          419, "AuthenticationTimeoutException",
          500, "InternalServerError",
          502, "BadGateway",
          503, "ServiceUnavailableException",
          504, "GatewayTimeout");

  /**
   * The routes served, as the config response lists them. Strings, not Endpoint constants:
   * Endpoint needs the shaded Apache HttpClient, which this runtime jar leaves out.
   */
  private static final List<String> ENDPOINTS =
      List.of(
          "GET /v1/{prefix}/namespaces",
          "POST /v1/{prefix}/namespaces",
          "GET /v1/{prefix}/namespaces/{namespace}",
          "HEAD /v1/{prefix}/namespaces/{namespace}",
          "DELETE /v1/{prefix}/namespaces/{namespace}",
          "POST /v1/{prefix}/namespaces/{namespace}/properties",
          "GET /v1/{prefix}/namespaces/{namespace}/tables",
          "POST /v1/{prefix}/namespaces/{namespace}/tables",
          "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
          "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}",
          "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
          "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}",
          "POST /v1/{prefix}/namespaces/{namespace}/register",
          "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}/metrics",
          "POST /v1/{prefix}/tables/rename",
          "POST /v1/{prefix}/transactions/commit",
          "GET /v1/{prefix}/namespaces/{namespace}/views",
          "POST /v1/{prefix}/namespaces/{namespace}/views",
          "GET /v1/{prefix}/namespaces/{namespace}/views/{view}",
          "HEAD /v1/{prefix}/namespaces/{namespace}/views/{view}",
          "POST /v1/{prefix}/namespaces/{namespace}/views/{view}",
          "DELETE /v1/{prefix}/namespaces/{namespace}/views/{view}",
          "POST /v1/{prefix}/views/rename");

  /** An HTTP answer decided before the catalog is reached (auth, routing, faults). */
  private static final class HttpError extends RuntimeException {
    private final int status;
    private final String type;

    HttpError(int status, String type, String message) {
      super(message);
      this.status = status;
      this.type = type;
    }
  }

  /** A pending fault: see the header comment. */
  private static final class Fault {
    final Integer beforeCommit;
    final Integer commitThen;
    final Integer anyRequest;
    final long delayMs;
    final String type;
    final String message;
    int remaining;

    Fault(JsonNode spec) {
      this.beforeCommit = optionalInt(spec, "before_commit");
      this.commitThen = optionalInt(spec, "commit_then");
      this.anyRequest = optionalInt(spec, "any_request");
      this.delayMs = spec.path("delay_ms").asLong(0);
      this.type = spec.hasNonNull("type") ? spec.get("type").asText() : null;
      this.message = spec.hasNonNull("message") ? spec.get("message").asText() : null;
      this.remaining = spec.path("count").asInt(1);
      if (beforeCommit != null && commitThen != null) {
        throw new IllegalArgumentException("A fault has before_commit or commit_then, not both");
      }
      if (beforeCommit == null && commitThen == null && anyRequest == null && delayMs <= 0) {
        throw new IllegalArgumentException(
            "A fault needs before_commit, commit_then, any_request or delay_ms");
      }
      if (remaining == 0 || remaining < -1) {
        throw new IllegalArgumentException("count must be positive, or -1 for until reset");
      }
    }

    private static Integer optionalInt(JsonNode spec, String field) {
      return spec.hasNonNull(field) ? spec.get(field).asInt() : null;
    }

    boolean commitsOnly() {
      return beforeCommit != null || commitThen != null;
    }

    Map<String, Object> describe() {
      Map<String, Object> out = new LinkedHashMap<>();
      if (beforeCommit != null) {
        out.put("before_commit", beforeCommit);
      }
      if (anyRequest != null) {
        out.put("any_request", anyRequest);
      }
      if (commitThen != null) {
        out.put("commit_then", commitThen);
      }
      if (delayMs > 0) {
        out.put("delay_ms", delayMs);
      }
      out.put("count", remaining);
      return out;
    }
  }

  private final ObjectMapper mapper = RESTObjectMapper.mapper();
  private final SecureRandom random = new SecureRandom();
  private final Catalog catalog;
  private final SupportsNamespaces namespaces;
  private final ViewCatalog views;
  private final String prefix;
  private final String clientId;
  private final String clientSecret;
  private final Map<String, String> configDefaults;
  private final Map<String, String> configOverrides;
  private final Map<String, Long> tokens = new ConcurrentHashMap<>(); // token -> expiry (ms)
  private final List<String> requests = new ArrayList<>();
  private final List<String> answers = new ArrayList<>();
  private volatile boolean etags = false;
  private final List<Fault> faults = new ArrayList<>();
  private volatile int tokenLifetimeSeconds;
  // Settings a load- or create-table response vends to the client (its `config`), as a
  // catalog with credential vending does; set through POST /__test/settings.
  private volatile Map<String, String> tableConfig = Map.of();

  IcefloeRestServer(JsonNode config, Catalog catalog) {
    this.catalog = catalog;
    this.namespaces = (SupportsNamespaces) catalog;
    this.views = catalog instanceof ViewCatalog ? (ViewCatalog) catalog : null;
    this.prefix = config.path("prefix").asText("icefloe");
    this.clientId = config.path("client_id").asText();
    this.clientSecret = config.path("client_secret").asText();
    this.tokenLifetimeSeconds = config.path("token_lifetime_s").asInt(3600);
    this.configDefaults = stringMap(config.path("config_defaults"));
    this.configOverrides = stringMap(config.path("config_overrides"));
    this.configOverrides.put("prefix", prefix);
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 2 || !"--config".equals(args[0])) {
      LOG.println("usage: IcefloeRestServer --config <file.json>");
      System.exit(2);
    }
    long started = System.nanoTime();
    ObjectMapper mapper = RESTObjectMapper.mapper();
    JsonNode config = mapper.readTree(Files.readString(Paths.get(args[1])));

    Map<String, String> properties = stringMap(config.path("catalog_properties"));
    String impl = config.path("catalog_impl").asText("org.apache.iceberg.jdbc.JdbcCatalog");
    String name = config.path("catalog_name").asText("icefloe");
    Catalog catalog = CatalogUtil.loadCatalog(impl, name, properties, hadoopConfiguration());

    IcefloeRestServer adapter = new IcefloeRestServer(config, catalog);
    String host = config.path("host").asText("127.0.0.1");
    InetSocketAddress address = new InetSocketAddress(host, config.path("port").asInt(0));
    HttpServer server = HttpServer.create(address, 64);
    server.createContext("/", adapter::handle);
    server.setExecutor(Executors.newCachedThreadPool());
    server.start();
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  server.stop(0);
                  closeQuietly(catalog);
                }));

    if (config.path("exit_on_stdin_eof").asBoolean(false)) {
      // The launcher holds our stdin open: when it dies, however abruptly, so does the server.
      Thread watchdog =
          new Thread(
              () -> {
                try {
                  while (System.in.read() != -1) {
                    // discard
                  }
                } catch (IOException e) {
                  // closed: same as EOF
                }
                System.exit(0);
              },
              "stdin-watchdog");
      watchdog.setDaemon(true);
      watchdog.start();
    }

    int port = server.getAddress().getPort();
    LOG.printf(
        "IcefloeRestServer: %s catalog %s on http://%s:%d/v1/%s (ready in %d ms)%n",
        impl, name, host, port, adapter.prefix, (System.nanoTime() - started) / 1_000_000);
    String readyFile = config.path("ready_file").asText("");
    if (!readyFile.isEmpty()) {
      Path tmp = Paths.get(readyFile + ".tmp");
      Files.writeString(tmp, Integer.toString(port));
      Files.move(tmp, Paths.get(readyFile), StandardCopyOption.ATOMIC_MOVE);
    }
  }

  /** A Hadoop Configuration when Hadoop is on the class path (HadoopFileIO needs one). */
  private static Object hadoopConfiguration() {
    try {
      return Class.forName("org.apache.hadoop.conf.Configuration").getConstructor().newInstance();
    } catch (ClassNotFoundException e) {
      return null;
    } catch (ReflectiveOperationException e) {
      throw new IllegalStateException("Cannot create a Hadoop Configuration", e);
    }
  }

  private static void closeQuietly(Object closeable) {
    if (closeable instanceof AutoCloseable) {
      try {
        ((AutoCloseable) closeable).close();
      } catch (Exception e) {
        LOG.println("IcefloeRestServer: closing the catalog failed: " + e);
      }
    }
  }

  private static Map<String, String> stringMap(JsonNode node) {
    Map<String, String> out = new LinkedHashMap<>();
    node.fields().forEachRemaining(entry -> out.put(entry.getKey(), entry.getValue().asText()));
    return out;
  }

  // ---------------------------------------------------------------------------------------
  // HTTP

  private void handle(HttpExchange exchange) throws IOException {
    long started = System.nanoTime();
    String method = exchange.getRequestMethod().toUpperCase(Locale.ROOT);
    String path = exchange.getRequestURI().getRawPath();
    int status;
    try (exchange) {
      if (path.startsWith("/__test/")) {
        status = handleTestHook(exchange, method, path);
      } else {
        synchronized (requests) {
          requests.add(method + " " + path);
        }
        status = handleApi(exchange, method, path);
      }
    } catch (RuntimeException | IOException e) {
      LOG.printf("IcefloeRestServer: %s %s failed: %s%n", method, path, e);
      e.printStackTrace(LOG);
      return;
    }
    if (!path.startsWith("/__test/")) {
      synchronized (requests) {
        answers.add(method + " " + path + " -> " + status);
      }
    }
    LOG.printf(
        "IcefloeRestServer: %s %s -> %d (%d ms)%n",
        method, path, status, (System.nanoTime() - started) / 1_000_000);
  }

  private int handleApi(HttpExchange exchange, String method, String path) throws IOException {
    Object response;
    int status;
    try {
      byte[] body = readBody(exchange);
      Map<String, String> query = parseQuery(exchange.getRequestURI().getRawQuery());
      List<String> parts = Arrays.asList(path.substring(1).split("/", -1));
      if (parts.size() == 3
          && "v1".equals(parts.get(0))
          && "oauth".equals(parts.get(1))
          && "tokens".equals(parts.get(2))) {
        return handleToken(exchange, method, body);
      }
      authenticate(exchange);
      boolean commit = isCommit(method, parts);
      Fault fault = takeFault(commit);
      if (fault != null && fault.delayMs > 0) {
        sleep(fault.delayMs);
      }
      if (fault != null && fault.beforeCommit != null) {
        throw faultError(fault, fault.beforeCommit, "before the commit was applied");
      }
      if (fault != null && fault.anyRequest != null) {
        throw faultError(fault, fault.anyRequest, "before the request was handled");
      }
      response = route(method, parts, query, body);
      if (fault != null && fault.commitThen != null) {
        throw faultError(fault, fault.commitThen, "after the commit was applied");
      }
      status = response == null ? 204 : 200;
      if ("HEAD".equals(method)) {
        response = null;
      }
      if (etags && "GET".equals(method) && response instanceof LoadTableResponse) {
        String etag = etag(((LoadTableResponse) response).metadataLocation());
        exchange.getResponseHeaders().set("ETag", etag);
        if (etag.equals(exchange.getRequestHeaders().getFirst("If-None-Match"))) {
          status = 304;
          response = null;
        }
      }
    } catch (HttpError e) {
      status = e.status;
      response = error(e.status, e.type, e.getMessage());
    } catch (Exception e) {
      status = statusOf(e);
      if (status == 500) {
        e.printStackTrace(LOG);
      }
      String message = e.getMessage() != null ? e.getMessage() : e.getClass().getName();
      response = error(status, e.getClass().getSimpleName(), message);
    }
    if ("HEAD".equals(method) && response instanceof ErrorResponse) {
      response = null; // HEAD answers have no body
    }
    send(exchange, status, response);
    return status;
  }

  /** A strong ETag (quoted, RFC 9110) of a table's metadata location. */
  private static String etag(String metadataLocation) {
    try {
      byte[] hash =
          MessageDigest.getInstance("SHA-256")
              .digest(metadataLocation.getBytes(StandardCharsets.UTF_8));
      return "\"" + HexFormat.of().formatHex(hash) + "\"";
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  private static boolean isCommit(String method, List<String> parts) {
    if (!"POST".equals(method) || parts.size() < 3) {
      return false;
    }
    List<String> rest = parts.subList(2, parts.size());
    boolean tableUpdate =
        rest.size() == 4 && "namespaces".equals(rest.get(0)) && "tables".equals(rest.get(2));
    boolean transaction =
        rest.size() == 2 && "transactions".equals(rest.get(0)) && "commit".equals(rest.get(1));
    return tableUpdate || transaction;
  }

  private static int statusOf(Throwable e) {
    for (Class<?> cls = e.getClass(); cls != null; cls = cls.getSuperclass()) {
      Integer status = ERROR_CODES.get(cls);
      if (status != null) {
        return status;
      }
    }
    return 500;
  }

  private static HttpError faultError(Fault fault, int status, String when) {
    String type =
        fault.type != null ? fault.type : STATUS_TYPES.getOrDefault(status, "RESTException");
    String message =
        fault.message != null ? fault.message : "Injected fault: " + status + " " + when;
    return new HttpError(status, type, message);
  }

  private static ErrorResponse error(int status, String type, String message) {
    return ErrorResponse.builder().responseCode(status).withType(type).withMessage(message).build();
  }

  private static void sleep(long millis) {
    try {
      Thread.sleep(millis);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private static byte[] readBody(HttpExchange exchange) throws IOException {
    try (InputStream in = exchange.getRequestBody()) {
      return in.readAllBytes();
    }
  }

  private static Map<String, String> parseQuery(String rawQuery) {
    Map<String, String> out = new LinkedHashMap<>();
    if (rawQuery == null || rawQuery.isEmpty()) {
      return out;
    }
    for (String pair : rawQuery.split("&")) {
      int eq = pair.indexOf('=');
      String key = eq < 0 ? pair : pair.substring(0, eq);
      String value = eq < 0 ? "" : pair.substring(eq + 1);
      // Values stay URL-encoded: a namespace (`parent`) is decoded by RESTUtil.decodeNamespace.
      out.put(URLDecoder.decode(key, StandardCharsets.UTF_8), value);
    }
    return out;
  }

  private void send(HttpExchange exchange, int status, Object response) throws IOException {
    if (response == null) {
      exchange.sendResponseHeaders(status, -1);
      return;
    }
    byte[] bytes = mapper.writeValueAsBytes(response);
    exchange.getResponseHeaders().set("Content-Type", "application/json");
    exchange.sendResponseHeaders(status, bytes.length);
    try (OutputStream out = exchange.getResponseBody()) {
      out.write(bytes);
    }
  }

  private <T extends RESTRequest> T parse(byte[] body, Class<T> type) throws IOException {
    T request = mapper.readValue(body, type);
    request.validate();
    return request;
  }

  // ---------------------------------------------------------------------------------------
  // OAuth2

  private int handleToken(HttpExchange exchange, String method, byte[] body) throws IOException {
    if (!"POST".equals(method)) {
      return sendOAuthError(exchange, 400, "invalid_request", "The token endpoint takes POST");
    }
    Map<String, String> form = RESTUtil.decodeFormData(new String(body, StandardCharsets.UTF_8));
    String grantType = form.getOrDefault("grant_type", "");
    String id = form.get("client_id");
    String secret = form.get("client_secret");
    String basic = exchange.getRequestHeaders().getFirst("Authorization");
    if (basic != null && basic.regionMatches(true, 0, "Basic ", 0, 6)) {
      String decoded =
          new String(Base64.getDecoder().decode(basic.substring(6).trim()), StandardCharsets.UTF_8);
      int colon = decoded.indexOf(':');
      id = colon < 0 ? decoded : decoded.substring(0, colon);
      secret = colon < 0 ? "" : decoded.substring(colon + 1);
    }
    if ("client_credentials".equals(grantType)) {
      if (id == null || secret == null) {
        return sendOAuthError(
            exchange, 400, "invalid_request", "client_id and client_secret are required");
      }
      if (!clientId.equals(id) || !clientSecret.equals(secret)) {
        return sendOAuthError(exchange, 401, "invalid_client", "Invalid client credentials");
      }
    } else if (TOKEN_EXCHANGE.equals(grantType)) {
      // How the Java client refreshes: a still-valid token exchanged for a fresh one.
      if (!isValid(form.get("subject_token"))) {
        return sendOAuthError(exchange, 401, "invalid_client", "Invalid or expired subject_token");
      }
    } else {
      return sendOAuthError(
          exchange, 400, "unsupported_grant_type", "Unsupported grant_type: " + grantType);
    }
    byte[] bytes = new byte[24];
    random.nextBytes(bytes);
    String token = Base64.getUrlEncoder().withoutPadding().encodeToString(bytes);
    int lifetime = tokenLifetimeSeconds;
    tokens.put(token, System.currentTimeMillis() + lifetime * 1000L);
    OAuthTokenResponse.Builder response =
        OAuthTokenResponse.builder()
            .withToken(token)
            .withTokenType("bearer")
            .withIssuedTokenType(ACCESS_TOKEN_TYPE)
            .setExpirationInSeconds(lifetime);
    String scope = form.get("scope");
    if (scope != null && !scope.isEmpty()) {
      response.addScopes(Arrays.asList(scope.split(" ")));
    }
    send(exchange, 200, response.build());
    return 200;
  }

  private int sendOAuthError(HttpExchange exchange, int status, String error, String description)
      throws IOException {
    Map<String, String> body = new LinkedHashMap<>();
    body.put("error", error);
    body.put("error_description", description);
    send(exchange, status, body);
    return status;
  }

  private boolean isValid(String token) {
    Long expiry = token == null ? null : tokens.get(token);
    return expiry != null && expiry > System.currentTimeMillis();
  }

  private void authenticate(HttpExchange exchange) {
    String header = exchange.getRequestHeaders().getFirst("Authorization");
    if (header == null || !header.regionMatches(true, 0, "Bearer ", 0, 7)) {
      throw new HttpError(401, "NotAuthorizedException", "Not authorized: missing bearer token");
    }
    String token = header.substring(7).trim();
    Long expiry = tokens.get(token);
    if (expiry == null) {
      throw new HttpError(401, "NotAuthorizedException", "Not authorized: unknown token");
    }
    if (expiry <= System.currentTimeMillis()) {
      throw new HttpError(401, "NotAuthorizedException", "Not authorized: token expired");
    }
  }

  // ---------------------------------------------------------------------------------------
  // Catalog routes

  private Object route(String method, List<String> parts, Map<String, String> query, byte[] body)
      throws IOException {
    if (parts.size() == 2 && "v1".equals(parts.get(0)) && "config".equals(parts.get(1))) {
      if ("GET".equals(method)) {
        // The `warehouse` query parameter is accepted; this server has one warehouse.
        ConfigResponse config =
            ConfigResponse.builder()
                .withDefaults(configDefaults)
                .withOverrides(configOverrides)
                .build();
        ObjectNode json = mapper.valueToTree(config);
        ArrayNode endpoints = json.putArray("endpoints");
        ENDPOINTS.forEach(endpoints::add);
        return json;
      }
    } else if (parts.size() >= 3 && "v1".equals(parts.get(0)) && prefix.equals(parts.get(1))) {
      Object[] result = new Object[1];
      if (routeCatalog(method, parts.subList(2, parts.size()), query, body, result)) {
        return result[0];
      }
    }
    String message = "No route for request: " + method + " /" + String.join("/", parts);
    throw new HttpError(400, "BadRequestException", message);
  }

  /** Sets result[0] (null for 204) and returns true when a route matched. */
  private boolean routeCatalog(
      String method, List<String> rest, Map<String, String> query, byte[] body, Object[] result)
      throws IOException {
    int size = rest.size();
    String first = rest.get(0);
    if ("namespaces".equals(first)) {
      if (size == 1) {
        if ("GET".equals(method)) {
          Namespace parent =
              query.containsKey("parent")
                  ? RESTUtil.decodeNamespace(query.get("parent"))
                  : Namespace.empty();
          String pageSize = query.get("pageSize");
          result[0] =
              pageSize == null
                  ? CatalogHandlers.listNamespaces(namespaces, parent)
                  : CatalogHandlers.listNamespaces(
                      namespaces, parent, query.get("pageToken"), pageSize);
          return true;
        }
        if ("POST".equals(method)) {
          result[0] =
              CatalogHandlers.createNamespace(
                  namespaces, parse(body, CreateNamespaceRequest.class));
          return true;
        }
        return false;
      }
      Namespace namespace = RESTUtil.decodeNamespace(rest.get(1));
      if (size == 2) {
        switch (method) {
          case "GET":
            result[0] = CatalogHandlers.loadNamespace(namespaces, namespace);
            return true;
          case "HEAD":
            CatalogHandlers.namespaceExists(namespaces, namespace);
            return true;
          case "DELETE":
            CatalogHandlers.dropNamespace(namespaces, namespace);
            return true;
          default:
            return false;
        }
      }
      String collection = rest.get(2);
      if (size == 3 && "properties".equals(collection) && "POST".equals(method)) {
        result[0] =
            CatalogHandlers.updateNamespaceProperties(
                namespaces, namespace, parse(body, UpdateNamespacePropertiesRequest.class));
        return true;
      }
      if (size == 3 && "register".equals(collection) && "POST".equals(method)) {
        result[0] =
            CatalogHandlers.registerTable(
                catalog, namespace, parse(body, RegisterTableRequest.class));
        return true;
      }
      if ("tables".equals(collection)) {
        return routeTables(method, rest, namespace, query, body, result);
      }
      if ("views".equals(collection) && views != null) {
        return routeViews(method, rest, namespace, query, body, result);
      }
      return false;
    }
    if (size == 2 && "POST".equals(method)) {
      if ("tables".equals(first) && "rename".equals(rest.get(1))) {
        CatalogHandlers.renameTable(catalog, parse(body, RenameTableRequest.class));
        return true;
      }
      if ("views".equals(first) && "rename".equals(rest.get(1)) && views != null) {
        CatalogHandlers.renameView(views, parse(body, RenameTableRequest.class));
        return true;
      }
      if ("transactions".equals(first) && "commit".equals(rest.get(1))) {
        commitTransaction(parse(body, CommitTransactionRequest.class));
        return true;
      }
    }
    return false;
  }

  private boolean routeTables(
      String method,
      List<String> rest,
      Namespace namespace,
      Map<String, String> query,
      byte[] body,
      Object[] result)
      throws IOException {
    if (rest.size() == 3) {
      if ("GET".equals(method)) {
        String pageSize = query.get("pageSize");
        result[0] =
            pageSize == null
                ? CatalogHandlers.listTables(catalog, namespace)
                : CatalogHandlers.listTables(catalog, namespace, query.get("pageToken"), pageSize);
        return true;
      }
      if ("POST".equals(method)) {
        CreateTableRequest request = parse(body, CreateTableRequest.class);
        result[0] =
            request.stageCreate()
                ? CatalogHandlers.stageTableCreate(catalog, namespace, request)
                : CatalogHandlers.createTable(catalog, namespace, request);
        return true;
      }
      return false;
    }
    TableIdentifier ident = TableIdentifier.of(namespace, RESTUtil.decodeString(rest.get(3)));
    if (rest.size() == 4) {
      switch (method) {
        case "GET":
          result[0] = vend(CatalogHandlers.loadTable(catalog, ident));
          return true;
        case "HEAD":
          CatalogHandlers.tableExists(catalog, ident);
          return true;
        case "DELETE":
          if (Boolean.parseBoolean(query.getOrDefault("purgeRequested", "false"))) {
            CatalogHandlers.purgeTable(catalog, ident);
          } else {
            CatalogHandlers.dropTable(catalog, ident);
          }
          return true;
        case "POST":
          result[0] =
              CatalogHandlers.updateTable(catalog, ident, parse(body, UpdateTableRequest.class));
          return true;
        default:
          return false;
      }
    }
    if (rest.size() == 5 && "metrics".equals(rest.get(4)) && "POST".equals(method)) {
      parse(body, ReportMetricsRequest.class); // accepted and dropped
      return true;
    }
    return false;
  }

  private boolean routeViews(
      String method,
      List<String> rest,
      Namespace namespace,
      Map<String, String> query,
      byte[] body,
      Object[] result)
      throws IOException {
    if (rest.size() == 3) {
      if ("GET".equals(method)) {
        String pageSize = query.get("pageSize");
        result[0] =
            pageSize == null
                ? CatalogHandlers.listViews(views, namespace)
                : CatalogHandlers.listViews(views, namespace, query.get("pageToken"), pageSize);
        return true;
      }
      if ("POST".equals(method)) {
        result[0] =
            CatalogHandlers.createView(views, namespace, parse(body, CreateViewRequest.class));
        return true;
      }
      return false;
    }
    if (rest.size() != 4) {
      return false;
    }
    TableIdentifier ident = TableIdentifier.of(namespace, RESTUtil.decodeString(rest.get(3)));
    switch (method) {
      case "GET":
        result[0] = CatalogHandlers.loadView(views, ident);
        return true;
      case "HEAD":
        CatalogHandlers.viewExists(views, ident);
        return true;
      case "DELETE":
        CatalogHandlers.dropView(views, ident);
        return true;
      case "POST":
        result[0] = CatalogHandlers.updateView(views, ident, parse(body, UpdateTableRequest.class));
        return true;
      default:
        return false;
    }
  }

  /**
   * As RESTCatalogAdapter does it: every table's requirements are checked and its updates
   * applied in a transaction of its own, then the transactions are committed one by one
   * (atomic per table, not across tables).
   */
  private void commitTransaction(CommitTransactionRequest request) {
    List<org.apache.iceberg.Transaction> transactions = new ArrayList<>();
    for (UpdateTableRequest change : request.tableChanges()) {
      org.apache.iceberg.Table table = catalog.loadTable(change.identifier());
      if (!(table instanceof org.apache.iceberg.BaseTable)) {
        throw new IllegalStateException("Cannot wrap catalog that does not produce BaseTable");
      }
      org.apache.iceberg.Transaction transaction =
          org.apache.iceberg.Transactions.newTransaction(
              change.identifier().toString(), ((org.apache.iceberg.BaseTable) table).operations());
      org.apache.iceberg.BaseTransaction.TransactionTable txTable =
          (org.apache.iceberg.BaseTransaction.TransactionTable) transaction.table();
      CatalogHandlers.commit(txTable.operations(), change);
      transactions.add(transaction);
    }
    transactions.forEach(org.apache.iceberg.Transaction::commitTransaction);
  }

  // ---------------------------------------------------------------------------------------
  // Test hooks

  private Fault takeFault(boolean commit) {
    synchronized (faults) {
      for (Iterator<Fault> it = faults.iterator(); it.hasNext(); ) {
        Fault fault = it.next();
        if (fault.commitsOnly() && !commit) {
          continue;
        }
        if (fault.remaining > 0 && --fault.remaining == 0) {
          it.remove();
        }
        return fault;
      }
    }
    return null;
  }

  private int handleTestHook(HttpExchange exchange, String method, String path) throws IOException {
    byte[] body = readBody(exchange);
    Object response;
    int status = 200;
    try {
      switch (method + " " + path) {
        case "GET /__test/requests":
          synchronized (requests) {
            response = new ArrayList<>(requests);
          }
          break;
        case "GET /__test/answers":
          synchronized (requests) {
            response = new ArrayList<>(answers);
          }
          break;
        case "POST /__test/reset":
          synchronized (requests) {
            requests.clear();
            answers.clear();
          }
          etags = false;
          synchronized (faults) {
            faults.clear();
          }
          response = Map.of("reset", true);
          break;
        case "GET /__test/faults":
          response = describeFaults();
          break;
        case "POST /__test/faults":
          Fault fault = new Fault(mapper.readTree(body));
          synchronized (faults) {
            faults.add(fault);
          }
          response = describeFaults();
          break;
        case "POST /__test/settings":
          JsonNode settings = mapper.readTree(body);
          if (settings.has("token_lifetime_s")) {
            tokenLifetimeSeconds = settings.get("token_lifetime_s").asInt();
          }
          if (settings.has("etags")) {
            etags = settings.get("etags").asBoolean();
          }
          if (settings.has("table_config")) {
            tableConfig = stringMap(settings.get("table_config"));
          }
          response =
              Map.of(
                  "token_lifetime_s", tokenLifetimeSeconds,
                  "table_config", tableConfig,
                  "etags", etags);
          break;
        case "POST /__test/expire-tokens":
          tokens.replaceAll((token, expiry) -> 0L);
          response = Map.of("expired", tokens.size());
          break;
        default:
          status = 404;
          response = Map.of("error", "no test hook " + method + " " + path);
      }
    } catch (IllegalArgumentException | JsonProcessingException e) {
      status = 400;
      response = Map.of("error", String.valueOf(e.getMessage()));
    }
    send(exchange, status, response);
    return status;
  }

  private List<Map<String, Object>> describeFaults() {
    List<Map<String, Object>> out = new ArrayList<>();
    synchronized (faults) {
      faults.forEach(fault -> out.add(fault.describe()));
    }
    return out;
  }

  private LoadTableResponse vend(LoadTableResponse response) {
    if (tableConfig.isEmpty()) {
      return response;
    }
    return LoadTableResponse.builder()
        .withTableMetadata(response.tableMetadata())
        .addAllConfig(response.config())
        .addAllConfig(tableConfig)
        .build();
  }
}
