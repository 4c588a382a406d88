# Deployment files (deploy/, Dockerfile): schema-less checks of the Kubernetes manifests, compose
# files and image (scripts/check-manifests.py, python3-yaml), and a self-test proving the checker
# reports each rule it enforces.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME deploy_manifests COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/check-manifests.py)
  add_test(NAME deploy_manifests_self_test
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/self_test.py)
  set_tests_properties(deploy_manifests deploy_manifests_self_test PROPERTIES TIMEOUT 60 LABELS deploy)
endif()
