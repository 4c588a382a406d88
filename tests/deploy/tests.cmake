# tests/deploy: the Prometheus and Grafana files of deploy/, and the end-to-end check of df11d
# scraped by a real Prometheus (scripts/e2e-prometheus.sh). Included by tests/CMakeLists.txt.
set(DF11_DEPLOY ${PROJECT_SOURCE_DIR}/deploy)
find_program(DF11_PROMTOOL promtool)
find_program(DF11_PROMETHEUS prometheus)
find_package(Python3 COMPONENTS Interpreter)

if(DF11_PROMTOOL)
  add_test(NAME deploy_prometheus_config COMMAND ${DF11_PROMTOOL} check config ${DF11_DEPLOY}/prometheus/prometheus.yml)
  add_test(NAME deploy_prometheus_rules COMMAND ${DF11_PROMTOOL} check rules ${DF11_DEPLOY}/prometheus/rules.yml)
  add_test(NAME deploy_prometheus_rules_unit
           COMMAND ${DF11_PROMTOOL} test rules ${DF11_DEPLOY}/prometheus/rules_test.yml)
else()
  # scripts/setup.sh installs Debian's `prometheus`; without it these checks fail rather than vanish.
  add_test(NAME deploy_prometheus_config COMMAND sh -c "echo 'promtool not found: apt-get install prometheus'; exit 1")
  message(WARNING "promtool not found (apt-get install prometheus): deploy_prometheus_config will fail")
endif()

add_test(NAME deploy_grafana_dashboard COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/check_deploy.py
                                               ${PROJECT_SOURCE_DIR})

# End to end: skipped (exit 77) when df11d or prometheus is missing, and says so.
set(DF11_E2E_DAEMON "")
if(TARGET df11d)
  set(DF11_E2E_DAEMON $<TARGET_FILE:df11d>)
endif()
add_test(NAME deploy_e2e_prometheus
         COMMAND ${PROJECT_SOURCE_DIR}/scripts/e2e-prometheus.sh "${DF11_E2E_DAEMON}" $<TARGET_FILE:df11>
                 "${DF11_PROMETHEUS}")
set_tests_properties(deploy_e2e_prometheus PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
